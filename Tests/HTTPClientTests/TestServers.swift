import Foundation
import HTTPClient

/// Local servers started once for the whole test run (python3 + openssl, 127.0.0.1 only).
/// The script exits when this process's end of its stdin closes, or after `lifetimeSeconds`.
final class TestServers: Sendable {
    struct StartFailure: Error, CustomStringConvertible { let description: String }

    static let lifetimeSeconds = 300
    static let startTimeoutSeconds = 60.0
    /// The host name on the test server certificate, pointed at 127.0.0.1 with `resolveOverride`.
    static let gatewayHost = "apple-pay-gateway.test"

    static let shared: Result<TestServers, StartFailure> = Result { () throws(StartFailure) in try TestServers() }

    let directory: URL
    let httpPort: Int
    let mutualTLSPort: Int
    let tlsPort: Int
    let roguePort: Int
    let tls11Port: Int?
    let silentPort: Int
    let closedPort: Int
    // Kept so the pipe (and so the server) lives as long as this process.
    private let stdinPipe: Pipe
    private let process: Process

    private init() throws(StartFailure) {
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("tender-httpclient-tests-\(UUID().uuidString)")
        do {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            try testServerScript.write(to: directory.appendingPathComponent("servers.py"), atomically: true,
                                       encoding: .utf8)
        } catch {
            throw StartFailure(description: "cannot prepare \(directory.path): \(error)")
        }
        let process = Process()
        let stdinPipe = Pipe()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", "-W", "ignore", directory.appendingPathComponent("servers.py").path,
                             directory.path, String(Self.lifetimeSeconds)]
        process.standardInput = stdinPipe
        process.standardOutput = FileHandle.nullDevice
        do { try process.run() } catch { throw StartFailure(description: "cannot start python3: \(error)") }

        let ready = directory.appendingPathComponent("ready.json")
        let deadline = Date().addingTimeInterval(Self.startTimeoutSeconds)
        var ports: [String: Int?] = [:]
        while Date() < deadline {
            if let data = try? Data(contentsOf: ready),
               let decoded = try? JSONDecoder().decode([String: Int?].self, from: data) {
                ports = decoded
                break
            }
            guard process.isRunning else { break }
            Thread.sleep(forTimeInterval: 0.05)
        }
        guard let http = ports["http"] ?? nil, let mtls = ports["mtls"] ?? nil, let tls = ports["tls"] ?? nil,
              let rogue = ports["rogue"] ?? nil, let silent = ports["silent"] ?? nil,
              let closed = ports["closed"] ?? nil
        else {
            process.terminate()
            throw StartFailure(description: "test servers did not start (ports: \(ports))")
        }
        self.directory = directory
        self.process = process
        self.stdinPipe = stdinPipe
        httpPort = http
        mutualTLSPort = mtls
        tlsPort = tls
        roguePort = rogue
        tls11Port = ports["tls11"] ?? nil
        silentPort = silent
        closedPort = closed
    }

    static func get() throws -> TestServers { try shared.get() }

    func file(_ name: String) -> String { directory.appendingPathComponent(name).path }

    func bytes(_ name: String) throws -> [UInt8] { Array(try Data(contentsOf: URL(fileURLWithPath: file(name)))) }

    /// The test CA, with the client identity signed by it.
    func clientIdentity() throws -> TLSClientIdentity {
        TLSClientIdentity(certificatePEM: try bytes("client.pem"), privateKeyPEM: SecretPEM(try bytes("client.key")))
    }

    /// Options trusting only the test CA and resolving the gateway name to 127.0.0.1 on `port`.
    func gatewayOptions(port: Int, identity: Bool = true) throws -> HTTPClientOptions {
        var options = HTTPClientOptions()
        options.caFile = file("ca.pem")
        options.resolveOverride = ["\(Self.gatewayHost):\(port):127.0.0.1"]
        options.clientIdentity = identity ? try clientIdentity() : nil
        options.connectTimeoutMilliseconds = 5_000
        options.totalTimeoutMilliseconds = 10_000
        return options
    }

    func gatewayURL(port: Int, path: String) -> String { "https://\(Self.gatewayHost):\(port)\(path)" }

    func plainOptions() -> HTTPClientOptions {
        var options = HTTPClientOptions()
        options.allowPlainHTTPForTesting = true
        options.connectTimeoutMilliseconds = 5_000
        options.totalTimeoutMilliseconds = 10_000
        return options
    }

    func plainURL(_ path: String) -> String { "http://127.0.0.1:\(httpPort)\(path)" }
}

/// Runs `body` and returns its error, so tests can assert the code (nil when it did not throw).
func httpError(_ body: () throws(HTTPClientError) -> HTTPClientResponse) -> HTTPClientError? {
    do {
        _ = try body()
        return nil
    } catch {
        return error
    }
}

/// A value shared between test threads.
final class LockedBox<Value>: @unchecked Sendable {
    // @unchecked: every access goes through `lock`.
    private let lock = NSLock()
    private var value: Value

    init(_ value: Value) { self.value = value }

    func withLock<Result>(_ body: (inout Value) -> Result) -> Result {
        lock.lock()
        defer { lock.unlock() }
        return body(&value)
    }
}
