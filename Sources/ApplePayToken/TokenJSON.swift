/// The token's members as read from its JSON, strings as their unescaped UTF-8, nothing decoded further
/// (Payment Token Format Reference: `paymentData` with `version`, `data`, `signature`, `header`; Apple
/// Pay JS wraps it with `paymentMethod` and `transactionIdentifier`).
struct TokenFields {
    /// Why the JSON was refused; `inBarePaymentData` when it held no `paymentData` and was read as one.
    struct Failure: Error {
        let error: JSONReadError
        let inBarePaymentData: Bool
    }

    var version: [UInt8] = []
    var data: [UInt8] = []
    var signature: [UInt8] = []
    var ephemeralPublicKey: [UInt8]?
    var wrappedKey: [UInt8]?
    var publicKeyHash: [UInt8] = []
    var transactionId: [UInt8] = []
    var applicationData: [UInt8]?
    var paymentMethod: PaymentMethodInfo?
    var transactionIdentifier: String?

    private static let wrapperKeys: [[UInt8]] = ["paymentData", "paymentMethod", "transactionIdentifier", "version", "data", "signature",
                                                 "header"].map { Array($0.utf8) }
    private static let paymentDataKeys: [[UInt8]] = ["version", "data", "signature", "header"].map { Array($0.utf8) }
    private static let headerKeys: [[UInt8]] = ["ephemeralPublicKey", "wrappedKey", "publicKeyHash", "transactionId", "applicationData"]
        .map { Array($0.utf8) }
    private static let paymentMethodKeys: [[UInt8]] = ["displayName", "network", "type"].map { Array($0.utf8) }

    /// Reads the wrapper, or (when it has no non-null `paymentData`) the whole object as a bare paymentData,
    /// whose members are then taken from the top level.
    init(_ buffer: UnsafeBufferPointer<UInt8>, depthMax: Int) throws(Failure) {
        var reader = JSONReader(buffer, depthMax: depthMax)
        var paymentDataFound = false
        do throws(JSONReadError) {
            try reader.forEachMember(Self.wrapperKeys) { (key, r: inout JSONReader) throws(JSONReadError) in
                switch key {
                case 0:
                    if try !r.skipNull() {
                        try readPaymentData(&r)
                        paymentDataFound = true
                    }
                case 1: paymentMethod = try Self.readPaymentMethod(&r)
                case 2: transactionIdentifier = try r.readOptionalString()
                default: try r.skipValue()
                }
            }
            try reader.expectEnd()
        } catch {
            throw Failure(error: error, inBarePaymentData: false)
        }
        guard !paymentDataFound else { return }
        // No paymentData: the object itself must be one (a bare paymentData, as some SDKs pass it).
        do throws(JSONReadError) {
            var bare = JSONReader(buffer, depthMax: depthMax)
            try readPaymentData(&bare)
        } catch {
            throw Failure(error: error, inBarePaymentData: true)
        }
    }

    private mutating func readPaymentData(_ reader: inout JSONReader) throws(JSONReadError) {
        let seen = try reader.forEachMember(Self.paymentDataKeys) { (key, r: inout JSONReader) throws(JSONReadError) in
            switch key {
            case 0: version = try r.readStringBytes()
            case 1: data = try r.readStringBytes()
            case 2: signature = try r.readStringBytes()
            default: try readHeader(&r)
            }
        }
        guard !seen.contains(false) else { throw .shape(reader.index) }
    }

    private mutating func readHeader(_ reader: inout JSONReader) throws(JSONReadError) {
        let seen = try reader.forEachMember(Self.headerKeys) { (key, r: inout JSONReader) throws(JSONReadError) in
            switch key {
            case 0: ephemeralPublicKey = try r.skipNull() ? nil : r.readStringBytes()
            case 1: wrappedKey = try r.skipNull() ? nil : r.readStringBytes()
            case 2: publicKeyHash = try r.readStringBytes()
            case 3: transactionId = try r.readStringBytes()
            default: applicationData = try r.skipNull() ? nil : r.readStringBytes()
            }
        }
        guard seen[2], seen[3] else { throw .shape(reader.index) }
    }

    private static func readPaymentMethod(_ reader: inout JSONReader) throws(JSONReadError) -> PaymentMethodInfo? {
        if try reader.skipNull() { return nil }
        var values: [String?] = [nil, nil, nil]
        try reader.forEachMember(paymentMethodKeys) { (key, r: inout JSONReader) throws(JSONReadError) in
            values[key] = try r.readOptionalString()
        }
        return PaymentMethodInfo(displayName: values[0], network: values[1], type: values[2])
    }
}

/// Canonical padded Base64 (RFC 4648 §4, standard alphabet): the text must be exactly what encoding its
/// bytes gives, i.e. a non-empty multiple of four characters, `=` only as the needed padding, and zero
/// bits below the padding.
enum Base64Canonical {
    private static let invalid: UInt8 = 0xFF
    private static let table: [UInt8] = {
        var table = [UInt8](repeating: invalid, count: 256)
        for (value, char) in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8.enumerated() {
            table[Int(char)] = UInt8(value)
        }
        return table
    }()

    /// The decoded bytes, or nil unless `text` is canonical and decodes to at least one byte.
    static func decode(_ text: [UInt8]) -> [UInt8]? {
        let count = text.count
        guard count > 0, count % 4 == 0 else { return nil }
        let padding = text[count - 1] != UInt8(ascii: "=") ? 0 : text[count - 2] != UInt8(ascii: "=") ? 1 : 2
        var out = [UInt8](repeating: 0, count: count / 4 * 3 - padding)
        let valid = table.withUnsafeBufferPointer { table in
            text.withUnsafeBufferPointer { input in
                out.withUnsafeMutableBufferPointer { output in
                    decode(input, padding: padding, table: table, into: output)
                }
            }
        }
        return valid ? out : nil
    }

    private static func decode(_ input: UnsafeBufferPointer<UInt8>, padding: Int, table: UnsafeBufferPointer<UInt8>,
                               into output: UnsafeMutableBufferPointer<UInt8>) -> Bool {
        let fullQuads = input.count / 4 - (padding > 0 ? 1 : 0)
        var bad: UInt8 = 0
        var o = 0
        for quad in 0..<fullQuads {
            let i = quad * 4
            let a = table[Int(input[i])], b = table[Int(input[i + 1])], c = table[Int(input[i + 2])], d = table[Int(input[i + 3])]
            bad |= (a | b | c | d) & 0xC0
            output[o] = a << 2 | b >> 4
            output[o + 1] = b << 4 | c >> 2
            output[o + 2] = c << 6 | d
            o += 3
        }
        guard bad == 0 else { return false }
        guard padding > 0 else { return true }
        let i = fullQuads * 4
        let a = table[Int(input[i])], b = table[Int(input[i + 1])]
        guard (a | b) & 0xC0 == 0 else { return false }
        output[o] = a << 2 | b >> 4
        if padding == 2 { return b & 0x0F == 0 }
        let c = table[Int(input[i + 2])]
        guard c & 0xC0 == 0, c & 0x03 == 0 else { return false }
        output[o + 1] = b << 4 | c >> 2
        return true
    }
}
