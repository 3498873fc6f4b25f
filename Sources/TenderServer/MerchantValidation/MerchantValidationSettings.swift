import HTTPClient

/// How merchant validation reaches Apple (README.md, Configuration; Apple's "Providing merchant validation"; docs/apple-pay-rules.md,
/// rules 40–46).
public struct MerchantValidationSettings: Sendable {
    /// Rule 44: the whole call, connect to last byte, never takes longer than this.
    public static let totalTimeoutMillisecondsMax = 10_000

    /// `TENDER_APPLE_PAY_GATEWAY_HOSTS`: exact host names a `validationURL` may name (rule 40).
    public var allowedHosts: [String]
    /// `TENDER_APPLE_PAY_GATEWAY_CA_FILE`: CA bundle trusted for the gateway; nil = system store.
    public var caFile: String?
    /// TCP connect plus TLS handshake deadline.
    public var connectTimeoutMilliseconds = 3_000
    /// Hard deadline for the whole call (rule 44; at most `totalTimeoutMillisecondsMax`). Leaves room inside
    /// Apple's 30 s `onvalidatemerchant` budget and below the server's 15 s handler deadline.
    public var totalTimeoutMilliseconds = 8_000
    /// Largest merchant session accepted; Apple's are about 2 KB.
    public var responseBodyBytesMax = 65_536
    /// Test-only: sends calls for one allow-listed host name to a local port and lets the connect
    /// policy accept loopback. Never set from the environment.
    public var unsafeGatewayOverrideForTesting: UnsafeGatewayOverride?

    /// A local stand-in for an Apple gateway host, used only by tests.
    public struct UnsafeGatewayOverride: Sendable {
        /// The allow-listed host name whose calls are redirected (it must still pass rule 40).
        public var host: String
        /// Local port the gateway listens on (the checked URL itself stays on 443).
        public var port: Int
        /// IPv4 address the host name resolves to, normally 127.0.0.1.
        public var address: String

        /// Points `host` at `address:port`.
        public init(host: String, port: Int, address: String = "127.0.0.1") {
            self.host = host
            self.port = port
            self.address = address
        }
    }

    /// Settings with production defaults for the given allow-list and CA file.
    public init(allowedHosts: [String], caFile: String? = nil) {
        self.allowedHosts = allowedHosts
        self.caFile = caFile
    }

    /// Settings from Tender's configuration.
    public init(configuration: TenderConfiguration) {
        self.init(allowedHosts: configuration.applePayGatewayHosts, caFile: configuration.applePayGatewayCAFile)
    }
}

/// Which addresses merchant validation may connect to once Apple's host name is resolved: public unicast
/// only, so a poisoned or rebinding DNS answer cannot aim the mutual-TLS call at an internal service
/// (docs/reliability-security.md §3.4: "resolve-then-connect only to Apple's published ranges").
public enum MerchantValidationAddressPolicy {
    /// True for a globally routable unicast address; false for loopback, private, link-local, CGNAT,
    /// multicast, documentation, reserved and unspecified ranges (and IPv6 forms embedding them).
    public static func isPublic(_ address: HTTPConnectAddress) -> Bool {
        switch address.family {
        case .ipv4:
            guard address.bytes.count == 4 else { return false }
            return isPublicIPv4(address.bytes)
        case .ipv6:
            guard address.bytes.count == 16 else { return false }
            return isPublicIPv6(address.bytes)
        }
    }

    static func isPublicIPv4(_ b: [UInt8]) -> Bool {
        switch (b[0], b[1], b[2]) {
        case (0, _, _), (10, _, _), (127, _, _): return false
        case (100, 64...127, _): return false            // shared address space (CGNAT)
        case (169, 254, _): return false                 // link-local, cloud metadata
        case (172, 16...31, _): return false
        case (192, 0, 0), (192, 0, 2), (192, 168, _): return false
        case (198, 18...19, _), (198, 51, 100), (203, 0, 113): return false
        case (224...255, _, _): return false             // multicast, reserved, broadcast
        default: return true
        }
    }

    static func isPublicIPv6(_ b: [UInt8]) -> Bool {
        let prefix10 = b[0..<10].allSatisfy { $0 == 0 }
        if prefix10 && b[10] == 0 && b[11] == 0 {
            return false                                 // ::, ::1 and the deprecated IPv4-compatible form
        }
        if prefix10 && b[10] == 0xFF && b[11] == 0xFF {
            return isPublicIPv4(Array(b[12..<16]))       // IPv4-mapped
        }
        if Array(b[0..<12]) == [0x00, 0x64, 0xFF, 0x9B, 0, 0, 0, 0, 0, 0, 0, 0] {
            return isPublicIPv4(Array(b[12..<16]))       // NAT64 well-known prefix
        }
        if b[0] & 0xFE == 0xFC { return false }          // unique local
        if b[0] == 0xFE && b[1] & 0xC0 == 0x80 { return false }  // link-local
        if b[0] == 0xFF { return false }                 // multicast
        if b[0] == 0x20 && b[1] == 0x01 && b[2] == 0x0D && b[3] == 0xB8 { return false }  // documentation
        return true
    }
}
