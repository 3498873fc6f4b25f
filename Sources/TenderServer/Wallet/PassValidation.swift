import Foundation
import HTTPServer

/// Checks of what Tender owns in a pass (Apple's "Pass Design and Creation", PassKit Package Format
/// Reference): the keys Tender writes itself, the required keys, colours, barcode formats, image names
/// and PNG sizes. Pure: each failure is a 422 problem with a stable code naming the field.
enum PassValidation {
    /// Keys Tender writes into pass.json; a merchant's pass may not set them.
    static let reservedKeys: Set<String> = ["formatVersion", "passTypeIdentifier", "serialNumber", "teamIdentifier",
                                            "webServiceURL", "authenticationToken"]
    /// Keys the merchant must give (the rest of Apple's required top-level keys are Tender's).
    static let requiredKeys = ["organizationName", "description"]
    /// Exactly one pass style.
    static let styleKeys: Set<String> = ["boardingPass", "coupon", "eventTicket", "generic", "storeCard"]
    static let colorKeys = ["backgroundColor", "foregroundColor", "labelColor"]
    static let barcodeFormats: Set<String> = ["PKBarcodeFormatQR", "PKBarcodeFormatPDF417", "PKBarcodeFormatAztec",
                                              "PKBarcodeFormatCode128"]
    /// Largest image sizes in points (pixels = points × scale), from Apple's layout guidance.
    static let imageSizesMax: [String: (width: Int, height: Int)] = [
        "icon": (38, 38), "logo": (160, 50), "strip": (375, 144), "thumbnail": (90, 90), "background": (180, 220),
        "footer": (286, 15),
    ]
    /// Most images per pass and bytes per image.
    static let imagesMax = 24
    static let imageBytesMax = 512 * 1_024
    /// Largest encoded pass.json.
    static let passBytesMax = 65_536

    static func problem(_ field: String, _ code: String, _ message: String) -> HTTPProblem {
        HTTPProblem(status: 422, code: code, title: "Pass not acceptable", detail: message,
                    errors: [.init(field: field, code: code, message: message)])
    }

    /// Checks the merchant's pass fields (before Tender adds its own).
    static func check(pass: [String: JSONValue]) throws(HTTPProblem) {
        for key in pass.keys.sorted() where reservedKeys.contains(key) {
            throw problem("pass.\(key)", "pass_field_reserved", "\(key) is written by Tender.")
        }
        for key in requiredKeys {
            guard case .string(let text)? = pass[key], !text.isEmpty else {
                throw problem("pass.\(key)", "pass_field_missing", "\(key) is required (a non-empty string).")
            }
        }
        let styles = pass.keys.filter { styleKeys.contains($0) }
        guard styles.count == 1 else {
            throw problem("pass", "pass_style_invalid", "Give exactly one of \(styleKeys.sorted().joined(separator: ", ")).")
        }
        for key in colorKeys {
            if let value = pass[key] {
                guard case .string(let text) = value, isRGB(text) else {
                    throw problem("pass.\(key)", "pass_color_invalid", "\(key) must be rgb(r, g, b) with 0–255 components.")
                }
            }
        }
        var barcodes: [(String, JSONValue)] = []
        if let single = pass["barcode"] { barcodes.append(("pass.barcode", single)) }
        if let many = pass["barcodes"] {
            guard case .array(let items) = many else {
                throw problem("pass.barcodes", "pass_barcode_invalid", "barcodes must be an array.")
            }
            barcodes += items.enumerated().map { ("pass.barcodes[\($0.offset)]", $0.element) }
        }
        for (field, barcode) in barcodes { try checkBarcode(barcode, field: field) }
        let size = (try? JSONCoding.encoder.encode(pass).count) ?? Int.max
        guard size <= passBytesMax else { throw problem("pass", "pass_too_large", "pass.json is larger than \(passBytesMax) bytes.") }
    }

    static func checkBarcode(_ value: JSONValue, field: String) throws(HTTPProblem) {
        guard case .object(let members) = value else { throw problem(field, "pass_barcode_invalid", "A barcode is an object.") }
        guard case .string(let format)? = members["format"], barcodeFormats.contains(format) else {
            throw problem("\(field).format", "pass_barcode_format_invalid",
                          "format must be one of \(barcodeFormats.sorted().joined(separator: ", ")).")
        }
        guard case .string? = members["message"], case .string? = members["messageEncoding"] else {
            throw problem(field, "pass_barcode_invalid", "A barcode needs message and messageEncoding strings.")
        }
    }

    /// `rgb(r, g, b)`, components 0–255 (PassKit Package Format Reference, colours).
    static func isRGB(_ text: String) -> Bool {
        guard text.hasPrefix("rgb("), text.hasSuffix(")") else { return false }
        let parts = text.dropFirst(4).dropLast().split(separator: ",", omittingEmptySubsequences: false)
        return parts.count == 3 && parts.allSatisfy { part in
            let trimmed = part.trimmingCharacters(in: .whitespaces)
            guard !trimmed.isEmpty, trimmed.count <= 3, trimmed.allSatisfy(\.isASCII), let n = Int(trimmed) else { return false }
            return (0...255).contains(n)
        }
    }

    /// Decodes and checks the images: allowed names, base64, PNG, size within Apple's maximum for
    /// the image and its scale. `icon.png` is required (Wallet refuses a pass without it).
    static func images(_ encoded: [String: JSONValue]) throws(HTTPProblem) -> [String: [UInt8]] {
        guard encoded.count <= imagesMax else { throw problem("images", "pass_images_too_many", "At most \(imagesMax) images.") }
        var decoded: [String: [UInt8]] = [:]
        for name in encoded.keys.sorted() {
            let field = "images.\(name)"
            guard let (base, scale) = imageName(name), let limit = imageSizesMax[base] else {
                throw problem(field, "pass_image_name_invalid",
                              "Image names are icon, logo, strip, thumbnail, background or footer, optionally @2x or @3x, then .png.")
            }
            guard case .string(let text)? = encoded[name], let data = Data(base64Encoded: text), data.count <= imageBytesMax else {
                throw problem(field, "pass_image_invalid", "Each image is base64 PNG data of at most \(imageBytesMax) bytes.")
            }
            let bytes = Array(data)
            guard let (width, height) = pngSize(bytes) else { throw problem(field, "pass_image_invalid", "The image is not a PNG.") }
            guard width <= limit.width * scale, height <= limit.height * scale else {
                throw problem(field, "pass_image_too_large",
                              "\(name) is \(width)×\(height) pixels; at most \(limit.width * scale)×\(limit.height * scale).")
            }
            decoded[name] = bytes
        }
        guard decoded["icon.png"] != nil else { throw problem("images.icon.png", "pass_image_missing", "icon.png is required.") }
        return decoded
    }

    /// (`icon`, 2) for `icon@2x.png`; nil for anything else.
    static func imageName(_ name: String) -> (String, Int)? {
        guard name.hasSuffix(".png") else { return nil }
        let stem = String(name.dropLast(4))
        for (suffix, scale) in [("@3x", 3), ("@2x", 2)] where stem.hasSuffix(suffix) {
            return (String(stem.dropLast(3)), scale)
        }
        return (stem, 1)
    }

    /// Width and height from a PNG's IHDR chunk (PNG spec §11.2.2), nil when not a PNG.
    static func pngSize(_ bytes: [UInt8]) -> (Int, Int)? {
        let signature: [UInt8] = [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]
        guard bytes.count >= 24, Array(bytes[0..<8]) == signature, Array(bytes[12..<16]) == Array("IHDR".utf8) else { return nil }
        func u32(_ at: Int) -> Int { bytes[at..<(at + 4)].reduce(0) { $0 << 8 | Int($1) } }
        let width = u32(16), height = u32(20)
        return width > 0 && height > 0 ? (width, height) : nil
    }
}
