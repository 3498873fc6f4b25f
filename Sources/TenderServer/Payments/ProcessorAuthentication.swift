import Foundation
import HTTPClient
#if canImport(Glibc)
import Glibc
#endif

/// How Tender proves itself to the `http` processor (docs/processor-protocol.md): a bearer secret read
/// from a file, a client certificate for mutual TLS, or both; and the CA its server must chain to.
public struct ProcessorAuthentication: Sendable, CustomStringConvertible {
    /// `Authorization: Bearer …` value's secret (`TENDER_PROCESSOR_TOKEN_FILE`).
    let bearerSecret: String?
    /// Client certificate and key (`TENDER_PROCESSOR_CLIENT_CERT_FILE`, `TENDER_PROCESSOR_CLIENT_KEY_FILE`).
    let clientIdentity: TLSClientIdentity?
    /// `TENDER_PROCESSOR_CA_FILE`.
    let caFile: String?

    /// No authentication (the simulator, or a stand-in in tests).
    public static let none = ProcessorAuthentication(bearerSecret: nil, clientIdentity: nil, caFile: nil)

    /// Largest accepted secret or PEM file.
    static let fileBytesMax = 65_536
    /// Largest bearer secret.
    static let secretBytesMax = 4_096

    /// True when the processor is told who is calling.
    public var authenticates: Bool { bearerSecret != nil || clientIdentity != nil }

    /// Never shows the secret or key.
    public var description: String {
        "ProcessorAuthentication(bearer: \(bearerSecret == nil ? "no" : "yes"), mutualTLS: \(clientIdentity == nil ? "no" : "yes"))"
    }

    /// Reads the files named by the environment; every failure names its variable.
    static func load(_ value: (String) -> String?) throws(ConfigurationError) -> ProcessorAuthentication {
        var secret: String?
        if let path = value("TENDER_PROCESSOR_TOKEN_FILE") {
            let bytes = try privateFile(path, variable: "TENDER_PROCESSOR_TOKEN_FILE")
            let text = String(decoding: bytes, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            guard !text.isEmpty, text.utf8.count <= secretBytesMax,
                  text.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7f }) else {
                throw ConfigurationError(variable: "TENDER_PROCESSOR_TOKEN_FILE",
                                         reason: "expected one line of printable ASCII, at most \(secretBytesMax) bytes")
            }
            secret = text
        }
        let certificate = value("TENDER_PROCESSOR_CLIENT_CERT_FILE"), key = value("TENDER_PROCESSOR_CLIENT_KEY_FILE")
        var identity: TLSClientIdentity?
        switch (certificate, key) {
        case (nil, nil):
            break
        case (let certificate?, let key?):
            let certificateBytes = try readFile(certificate, variable: "TENDER_PROCESSOR_CLIENT_CERT_FILE")
            var keyBytes = try privateFile(key, variable: "TENDER_PROCESSOR_CLIENT_KEY_FILE")
            identity = TLSClientIdentity(certificatePEM: certificateBytes, privateKeyPEM: SecretPEM(zeroingSource: &keyBytes))
        default:
            throw ConfigurationError(variable: certificate == nil ? "TENDER_PROCESSOR_CLIENT_CERT_FILE" : "TENDER_PROCESSOR_CLIENT_KEY_FILE",
                                     reason: "set both TENDER_PROCESSOR_CLIENT_CERT_FILE and TENDER_PROCESSOR_CLIENT_KEY_FILE, or neither")
        }
        let ca = value("TENDER_PROCESSOR_CA_FILE")
        if let ca { _ = try readFile(ca, variable: "TENDER_PROCESSOR_CA_FILE") }
        return ProcessorAuthentication(bearerSecret: secret, clientIdentity: identity, caFile: ca)
    }

    /// A secret file: refused when group- or world-accessible, like the master key.
    static func privateFile(_ path: String, variable: String) throws(ConfigurationError) -> [UInt8] {
        var info = stat()
        guard stat(path, &info) == 0 else { throw ConfigurationError(variable: variable, reason: "file not readable: \(path)") }
        guard info.st_mode & 0o077 == 0 else {
            throw ConfigurationError(variable: variable, reason: "\(path) is readable by group or others; chmod 600 it")
        }
        return try readFile(path, variable: variable)
    }

    static func readFile(_ path: String, variable: String) throws(ConfigurationError) -> [UInt8] {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw ConfigurationError(variable: variable, reason: "file not readable: \(path)")
        }
        guard !data.isEmpty, data.count <= fileBytesMax else {
            throw ConfigurationError(variable: variable, reason: "\(path) is empty or larger than \(fileBytesMax) bytes")
        }
        return Array(data)
    }
}
