import Foundation

/// One PEM block: its label (`CERTIFICATE`, `EC PRIVATE KEY`, …) and decoded DER.
public struct PEMBlock: Sendable {
    /// The text between `BEGIN ` and the closing dashes.
    public let label: String
    /// Base64-decoded body.
    public let der: [UInt8]
    /// RFC 1421 headers such as `Proc-Type` (present on legacy encrypted keys).
    public let headers: [String]
}

/// PEM reading and writing (RFC 7468), tolerant of the preambles merchants' files carry.
public enum PEM {
    /// Maximum PEM text accepted, so a hostile file cannot make us allocate without bound.
    public static let textBytesMax = 1 << 20

    /// Parses every block in `text`, skipping anything outside blocks (e.g. `Bag Attributes` lines
    /// that `openssl pkcs12` writes before each block).
    public static func blocks(in text: String) throws(CryptoError) -> [PEMBlock] {
        guard text.utf8.count <= textBytesMax else { throw CryptoError(.invalidArgument, "PEM text too large") }
        var result: [PEMBlock] = []
        var label: String?
        var headers: [String] = []
        var body = ""
        for rawLine in text.split(omittingEmptySubsequences: false, whereSeparator: { $0.isNewline }) {
            let line = rawLine.trimmingCharacters(in: .whitespaces)
            if let current = label {
                if line.hasPrefix("-----END ") {
                    guard line == "-----END \(current)-----" else {
                        throw CryptoError(.keyMalformed, "PEM END label does not match BEGIN")
                    }
                    guard let data = Data(base64Encoded: body) else {
                        throw CryptoError(.keyMalformed, "PEM body is not base64")
                    }
                    result.append(PEMBlock(label: current, der: Array(data), headers: headers))
                    label = nil
                    headers = []
                    body = ""
                } else if line.contains(":") {
                    headers.append(line)
                } else {
                    body += line
                }
            } else if line.hasPrefix("-----BEGIN "), line.hasSuffix("-----"), line.count > 16 {
                label = String(line.dropFirst(11).dropLast(5))
            }
        }
        guard label == nil else { throw CryptoError(.keyMalformed, "PEM block without END line") }
        return result
    }

    /// Encodes `der` as a PEM block with 64-column lines.
    public static func encode(label: String, der: [UInt8]) -> String {
        let b64 = Data(der).base64EncodedString()
        var out = "-----BEGIN \(label)-----\n"
        var index = b64.startIndex
        while index < b64.endIndex {
            let end = b64.index(index, offsetBy: 64, limitedBy: b64.endIndex) ?? b64.endIndex
            out += b64[index..<end] + "\n"
            index = end
        }
        out += "-----END \(label)-----\n"
        return out
    }
}
