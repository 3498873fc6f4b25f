/// An Apple Pay `validationURL` that passed docs/apple-pay-rules.md, rule 40; only `check` builds one.
///
/// The endpoint is an SSRF sink (docs/reliability-security.md, merchant validation): the URL comes from the
/// browser, so it is parsed strictly here and rebuilt from the checked parts before libcurl sees it.
public struct MerchantValidationURL: Sendable, Equatable, CustomStringConvertible {
    /// The URL to call, rebuilt as `https://<host><path>` from the checked parts.
    public let url: String
    /// The allow-listed host, lower-cased.
    public let host: String
    /// One of `allowedPaths`.
    public let path: String

    /// Longest validation URL accepted; Apple's are under 100 bytes.
    public static let urlBytesMax = 2_048

    /// Rule 40: `paymentSession`, or the legacy `startSession` Apple is phasing out (§4.1).
    public static let allowedPaths = ["/paymentservices/paymentSession", "/paymentservices/startSession"]

    /// Apple's production gateway hosts, with the historical pod hosts still handed out (§4.2).
    public static let appleGatewayHostsProduction: [String] =
        ["apple-pay-gateway.apple.com", "cn-apple-pay-gateway.apple.com"]
        + (1...5).map { "apple-pay-gateway-nc-pod\($0).apple.com" }
        + (1...5).map { "apple-pay-gateway-pr-pod\($0).apple.com" }
        + (1...3).map { "cn-apple-pay-gateway-sh-pod\($0).apple.com" }
        + (1...3).map { "cn-apple-pay-gateway-tj-pod\($0).apple.com" }

    /// Apple's sandbox gateway hosts (§4.2).
    public static let appleGatewayHostsSandbox = ["apple-pay-gateway-cert.apple.com",
                                                  "cn-apple-pay-gateway-cert.apple.com"]

    private init(host: String, path: String) {
        self.host = host
        self.path = path
        url = "https://" + host + path
    }

    /// The rebuilt URL.
    public var description: String { url }

    /// Applies rule 40 in order: size, bytes, absolute https, no userinfo, no IP literal, allowed host,
    /// port absent or 443, allowed path, no query, no fragment. Host comparison is ASCII case-insensitive
    /// and exact: no suffix match and no trailing-dot equivalence.
    public static func check(_ url: String, allowedHosts: [String]) -> Result<MerchantValidationURL, HTTPClientError> {
        func refuse(_ reason: HTTPClientError.ValidationURLReason, _ message: String)
            -> Result<MerchantValidationURL, HTTPClientError>
        {
            .failure(HTTPClientError(code: .validationURLInvalid, message: message, validationURLReason: reason))
        }
        let bytes = Array(url.utf8)
        guard bytes.count <= urlBytesMax else { return refuse(.tooLong, "longer than \(urlBytesMax) bytes") }
        // Printable ASCII only: no spaces, controls or IDN look-alikes. A backslash is refused because
        // browsers read it as "/" in https URLs while libcurl does not, so the two would see different hosts.
        guard bytes.allSatisfy({ $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "\\") }) else {
            return refuse(.malformed, "contains spaces, control, non-ASCII bytes or a backslash")
        }

        let delimiters: Set<UInt8> = [UInt8(ascii: "/"), UInt8(ascii: "?"), UInt8(ascii: "#")]
        guard let colon = bytes.firstIndex(where: { $0 == UInt8(ascii: ":") || delimiters.contains($0) }),
              bytes[colon] == UInt8(ascii: ":"), colon > 0, isSchemeStart(bytes[0]),
              bytes[1..<colon].allSatisfy(isSchemeByte)
        else { return refuse(.notAbsolute, "no scheme") }
        guard asciiLowercased(String(decoding: bytes[..<colon], as: UTF8.self)) == "https" else {
            return refuse(.schemeNotHTTPS, "scheme is not https")
        }
        let afterScheme = bytes[(colon + 1)...]
        guard afterScheme.starts(with: [UInt8(ascii: "/"), UInt8(ascii: "/")]) else {
            return refuse(.notAbsolute, "no authority after the scheme")
        }
        let authorityStart = afterScheme.startIndex + 2
        let authorityEnd = bytes[authorityStart...].firstIndex(where: { delimiters.contains($0) }) ?? bytes.endIndex
        let authority = bytes[authorityStart..<authorityEnd]

        guard !authority.contains(UInt8(ascii: "@")) else { return refuse(.userinfoPresent, "userinfo present") }
        guard !authority.isEmpty else { return refuse(.malformed, "empty host") }
        guard authority.first != UInt8(ascii: "[") else { return refuse(.ipLiteral, "IPv6 literal host") }
        let colons = authority.indices.filter { authority[$0] == UInt8(ascii: ":") }
        guard colons.count <= 1 else { return refuse(.malformed, "more than one ':' in the authority") }
        let hostBytes = colons.first.map { authority[..<$0] } ?? authority
        let portBytes = colons.first.map { authority[($0 + 1)...] }
        guard !hostBytes.isEmpty else { return refuse(.malformed, "empty host") }
        // Percent-encoded hosts are decoded by browsers ("%2E" is a dot); nothing legitimate needs them.
        guard !hostBytes.contains(UInt8(ascii: "%")) else { return refuse(.malformed, "percent-encoded host") }
        let host = asciiLowercased(String(decoding: hostBytes, as: UTF8.self))
        guard !endsInNumber(host) else { return refuse(.ipLiteral, "IPv4 literal host") }
        guard allowedHosts.contains(where: { asciiLowercased($0) == host }) else {
            return refuse(.hostNotAllowed, "host is not in the gateway allow-list")
        }
        if let portBytes {
            // Only the canonical spelling: "0443" or "" would also mean 443 to some parsers.
            guard Array(portBytes) == Array("443".utf8) else { return refuse(.portNotAllowed, "port is not 443") }
        }

        let rest = bytes[authorityEnd...]
        let pathEnd = rest.firstIndex(where: { $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") }) ?? rest.endIndex
        let path = String(decoding: rest[..<pathEnd], as: UTF8.self)
        guard allowedPaths.contains(path) else { return refuse(.pathNotAllowed, "path is not a payment-session path") }
        if pathEnd < rest.endIndex {
            if rest[pathEnd] == UInt8(ascii: "?") { return refuse(.queryPresent, "query present") }
            return refuse(.fragmentPresent, "fragment present")
        }
        return .success(MerchantValidationURL(host: host, path: path))
    }

    private static func isSchemeStart(_ byte: UInt8) -> Bool {
        (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
    }

    private static func isSchemeByte(_ byte: UInt8) -> Bool {
        isSchemeStart(byte) || (byte >= 0x30 && byte <= 0x39) || byte == UInt8(ascii: "+")
            || byte == UInt8(ascii: "-") || byte == UInt8(ascii: ".")
    }

    /// WHATWG URL "ends in a number": a host whose last label is decimal or 0x-hex is parsed as IPv4
    /// (so `2130706433`, `0x7f.1` and `127.1` all reach 127.0.0.1); any such host is an IP literal here.
    static func endsInNumber(_ host: String) -> Bool {
        var labels = host.split(separator: ".", omittingEmptySubsequences: false)
        if labels.count > 1, labels.last?.isEmpty == true { labels.removeLast() }
        guard let last = labels.last, !last.isEmpty else { return false }
        let lastBytes = Array(last.utf8)
        if lastBytes.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) { return true }
        guard lastBytes.count >= 2, lastBytes[0] == UInt8(ascii: "0"),
              lastBytes[1] == UInt8(ascii: "x") || lastBytes[1] == UInt8(ascii: "X")
        else { return false }
        return lastBytes[2...].allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66)
            || ($0 >= 0x41 && $0 <= 0x46) }
    }
}
