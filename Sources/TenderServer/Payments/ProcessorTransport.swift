import Foundation
import HTTPClient

/// What every processor connector shares on the wire: one libcurl client, the per-call deadline, bounded
/// retries of transient failures with the same request (so the same `Idempotency-Key`), TLS identity and
/// CA from `ProcessorAuthentication`, and plain HTTP only behind its unsafe switch.
struct ProcessorTransport: Sendable {
    /// Largest accepted response body.
    static let responseBytesMax = 65_536

    let timeoutMilliseconds: Int
    let retryPolicy: RetryPolicy
    let authentication: ProcessorAuthentication
    let allowPlainHTTPForTesting: Bool
    let client = HTTPClient()

    /// The libcurl options of one call.
    var options: HTTPClientOptions {
        var options = HTTPClientOptions()
        options.totalTimeoutMilliseconds = timeoutMilliseconds
        options.connectTimeoutMilliseconds = min(3_000, timeoutMilliseconds)
        options.responseBodyBytesMax = Self.responseBytesMax
        options.allowPlainHTTPForTesting = allowPlainHTTPForTesting
        options.clientIdentity = authentication.clientIdentity
        options.caFile = authentication.caFile
        return options
    }

    /// POSTs `body` (zeroed by the caller afterwards) with `headers`, retrying transient failures.
    func post(url: String, headers: [(String, String)], body: [UInt8]) -> Result<HTTPClientResponse, HTTPClientError> {
        let request = HTTPClientRequest(method: "POST", url: url, headers: headers, body: body)
        let options = self.options
        var generator = SystemRandomNumberGenerator()
        return retryPolicy.run(using: &generator, sleep: { usleep(UInt32($0) * 1_000) }) { _ throws(HTTPClientError) in
            try client.send(request, options: options)
        }
    }

    /// JSON of `value` with sorted keys and unescaped slashes (base64 cryptograms stay readable to the peer).
    static func encode<Value: Encodable>(_ value: Value) -> [UInt8]? {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return (try? encoder.encode(value)).map { Array($0) }
    }

    /// Overwrites a request body that held card data (PCI DSS 3.3.1).
    static func wipe(_ bytes: inout [UInt8]) {
        for i in bytes.indices { bytes[i] = 0 }
    }
}
