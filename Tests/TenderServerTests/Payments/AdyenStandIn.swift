import Foundation
import HTTPClient
@testable import TenderServer

/// The local Adyen stand-in (python3 + openssl, 127.0.0.1 only), started once for the test run. It checks every
/// request against a subset of Adyen's published CheckoutService-v71 schema and records it.
final class AdyenStandIn: Sendable {
    struct StartFailure: Error, CustomStringConvertible { let description: String }

    static let lifetimeSeconds = 600
    static let shared: Result<AdyenStandIn, StartFailure> = Result { () throws(StartFailure) in try AdyenStandIn() }
    static func get() throws -> AdyenStandIn { try shared.get() }

    /// `http` (plain loopback) and `mtls` (client certificate required).
    let ports: [String: Int]
    let directory: URL
    private let process: Process
    private let stdinPipe: Pipe

    private init() throws(StartFailure) {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tender-adyen-\(UUID().uuidString)")
        do {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            try adyenStandInScript.write(to: directory.appendingPathComponent("adyen.py"), atomically: true, encoding: .utf8)
        } catch {
            throw StartFailure(description: "cannot prepare \(directory.path): \(error)")
        }
        let process = Process()
        let stdinPipe = Pipe()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", "-W", "ignore", directory.appendingPathComponent("adyen.py").path, directory.path,
                             String(Self.lifetimeSeconds)]
        process.standardInput = stdinPipe
        process.standardOutput = FileHandle.nullDevice
        do { try process.run() } catch { throw StartFailure(description: "cannot start python3: \(error)") }
        let ready = directory.appendingPathComponent("ready.json")
        let deadline = Date().addingTimeInterval(60)
        var ports: [String: Int] = [:]
        while Date() < deadline {
            if let data = try? Data(contentsOf: ready), let decoded = try? JSONDecoder().decode([String: Int].self, from: data) {
                ports = decoded
                break
            }
            guard process.isRunning else { break }
            Thread.sleep(forTimeInterval: 0.05)
        }
        guard ports["http"] != nil, ports["mtls"] != nil else {
            process.terminate()
            throw StartFailure(description: "Adyen stand-in did not start")
        }
        self.ports = ports
        self.directory = directory
        self.process = process
        self.stdinPipe = stdinPipe
    }

    func file(_ name: String) -> String { directory.appendingPathComponent(name).path }
    var plainURL: String { "http://127.0.0.1:\(ports["http"] ?? 0)" }
    var mutualTLSURL: String { "https://127.0.0.1:\(ports["mtls"] ?? 0)" }
    var apiKey: String {
        (try? String(contentsOfFile: file("api-key"), encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines) ?? ""
    }

    /// Settings pointing at the plain port (the unsafe switch is on, as `TENDER_UNSAFE_PROCESSOR_PLAIN_HTTP_FOR_TESTING`).
    func settings(apiKey: String? = nil, url: String? = nil) -> AdyenSettings {
        AdyenSettings(baseURL: url ?? plainURL, merchantAccount: "TenderTestECOM", apiKey: apiKey ?? self.apiKey,
                      returnURL: "https://shop.test/checkout/return", allowPlainHTTPForTesting: url == nil)
    }

    /// One recorded call.
    struct Call: Decodable {
        let path: String
        let idempotencyKey: String?
        let apiKey: String?
        let contentType: String?
        let authorization: String?
        let body: JSONValueBox?
        let violations: [String]
        let status: Int
        let clientCertificate: Bool
    }

    /// Every call the stand-in saw with `key` as its Idempotency-Key, oldest first.
    func calls(key: String) throws -> [Call] {
        var options = HTTPClientOptions()
        options.allowPlainHTTPForTesting = true
        let response = try HTTPClient().send(HTTPClientRequest(method: "GET", url: plainURL + "/_calls"), options: options)
        struct Calls: Decodable { let calls: [Call] }
        return try JSONDecoder().decode(Calls.self, from: Data(response.body)).calls.filter { $0.idempotencyKey == key }
    }
}

/// Any JSON value, for reading recorded bodies in tests.
indirect enum JSONValueBox: Decodable, Equatable {
    case string(String), number(Double), bool(Bool), object([String: JSONValueBox]), array([JSONValueBox]), null

    init(from decoder: any Decoder) throws {
        let c = try decoder.singleValueContainer()
        if c.decodeNil() {
            self = .null
        } else if let b = try? c.decode(Bool.self) {
            self = .bool(b)
        } else if let n = try? c.decode(Double.self) {
            self = .number(n)
        } else if let s = try? c.decode(String.self) {
            self = .string(s)
        } else if let a = try? c.decode([JSONValueBox].self) {
            self = .array(a)
        } else {
            self = .object(try c.decode([String: JSONValueBox].self))
        }
    }

    /// The value at a dotted path (`mpiData.cavv`).
    subscript(_ path: String) -> JSONValueBox? {
        var value: JSONValueBox? = self
        for part in path.split(separator: ".") {
            guard case .object(let o)? = value else { return nil }
            value = o[String(part)]
        }
        return value
    }

    var string: String? { if case .string(let s) = self { return s } else { return nil } }
    var number: Double? { if case .number(let n) = self { return n } else { return nil } }
}
