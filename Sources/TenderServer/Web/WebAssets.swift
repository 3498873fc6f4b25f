import Crypto
import Foundation
import HTTPServer

/// One static file of the browser client, embedded in the binary (scripts/embed-web.sh).
struct WebAsset: Sendable {
    /// Path under web/, e.g. `demo/index.html`.
    let file: String
    let contentType: String
    let body: [UInt8]
    /// Strong validator: a quoted prefix of the body's SHA-256.
    let etag: String
}

/// The embedded files and how they are served: only these exact paths exist, so there is no file system
/// path to traverse; every response carries the security headers of `WebSecurityHeaders`.
enum WebAssets {
    /// The decoded files by their path under web/. A file that does not decode is a build defect.
    static let byFile: [String: WebAsset] = {
        var assets: [String: WebAsset] = [:]
        for (file, base64) in embeddedFiles {
            guard let data = Data(base64Encoded: base64) else {
                preconditionFailure("web/\(file) is not valid base64 in EmbeddedWebFiles.swift")
            }
            let body = [UInt8](data)
            let digest = Digest.sha256(body).prefix(16).map { String(format: "%02x", $0) }.joined()
            assets[file] = WebAsset(file: file, contentType: contentType(of: file), body: body, etag: "\"\(digest)\"")
        }
        return assets
    }()

    /// Content types by extension; every embedded file's extension must be listed (WebAssetTests).
    static let contentTypes: [String: String] = [
        "html": "text/html; charset=utf-8",
        "js": "text/javascript; charset=utf-8",
        "css": "text/css; charset=utf-8",
        "svg": "image/svg+xml",
        "txt": "text/plain; charset=utf-8",
    ]

    static func contentType(of file: String) -> String {
        let ext = file.split(separator: ".").last.map(String.init) ?? ""
        return contentTypes[ext] ?? "application/octet-stream"
    }

    /// The response for `asset`: `304` when `If-None-Match` names its ETag, else the body. `no-cache`
    /// makes browsers revalidate each time, so a new binary's files are picked up at once and an
    /// unchanged file costs a 304.
    static func response(_ asset: WebAsset, request: HTTPRequest, crossOrigin: Bool = false) -> HTTPResponse {
        var headers = HTTPHeaders([("ETag", asset.etag), ("Cache-Control", "no-cache")])
        WebSecurityHeaders.apply(to: &headers)
        // A merchant's page loads tender.js as a module from Tender's origin: modules need CORS.
        if crossOrigin { headers.add("Access-Control-Allow-Origin", "*") }
        if let presented = request.headers["If-None-Match"], matches(presented, etag: asset.etag) {
            return HTTPResponse(status: 304, headers: headers)
        }
        headers.add("Content-Type", asset.contentType)
        return HTTPResponse(status: 200, headers: headers, body: asset.body)
    }

    /// RFC 9110 §13.1.2: `*` or a list of entity tags, weak comparison.
    static func matches(_ header: String, etag: String) -> Bool {
        let tags = header.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        return tags.contains { $0 == "*" || $0 == etag || $0 == "W/" + etag }
    }
}

/// Headers on every page, asset and demo API response.
enum WebSecurityHeaders {
    /// Same-origin everything; no inline script or style, no plugins, no framing, no `<base>` tricks.
    static let contentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; "
        + "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

    static let fields: [(String, String)] = [
        ("Content-Security-Policy", contentSecurityPolicy),
        ("X-Content-Type-Options", "nosniff"),
        ("Referrer-Policy", "no-referrer"),
        ("X-Frame-Options", "DENY"),
        ("Cross-Origin-Opener-Policy", "same-origin"),
    ]

    static func apply(to headers: inout HTTPHeaders) {
        for (name, value) in fields { headers.replaceOrAdd(name, value) }
    }
}

extension TenderApp {
    /// `/tender.js` and its sheet styles always; `/console/` unless `TENDER_CONSOLE=off`; `/demo/` and its
    /// API with `TENDER_DEMO=on` (TenderServer/Demo).
    func registerWebRoutes(into router: inout Router) {
        func serve(_ urlPath: String, _ file: String, crossOrigin: Bool = false) {
            guard let asset = WebAssets.byFile[file] else { preconditionFailure("web/\(file) is not embedded") }
            router.add("GET", urlPath) { request in WebAssets.response(asset, request: request, crossOrigin: crossOrigin) }
        }
        serve("/tender.js", "tender.js", crossOrigin: true)
        serve("/tender-sheet.css", "tender-sheet.css", crossOrigin: true)
        var sections: [String] = []
        if configuration.consoleEnabled { sections.append("console") } else { registerDisabled("console", into: &router) }
        if configuration.demoEnabled { sections.append("demo") } else { registerDisabled("demo", into: &router) }
        for section in sections {
            let prefix = section + "/"
            for file in WebAssets.byFile.keys.sorted() where file.hasPrefix(prefix) {
                serve(file == prefix + "index.html" ? "/" + prefix : "/" + file, file)
            }
            router.add("GET", "/" + section) { _ in
                var headers = HTTPHeaders([("Location", "/" + prefix)])
                WebSecurityHeaders.apply(to: &headers)
                return HTTPResponse(status: 308, headers: headers)
            }
        }
        if configuration.demoEnabled { registerDemoRoutes(into: &router) }
    }

    /// A switched-off section keeps its paths, each answering 404 `<section>_disabled`, so the API's shape
    /// (and a 405 for a method no path has) does not depend on the switch.
    private func registerDisabled(_ section: String, into router: inout Router) {
        let problem = HTTPProblem(status: 404, code: section + "_disabled", title: "Not found",
                                  detail: "This server does not serve /\(section)/.")
        let disabled: HTTPHandler = { _ in throw problem }
        var paths = ["/" + section, "/" + section + "/"]
        for file in WebAssets.byFile.keys.sorted() where file.hasPrefix(section + "/") && !file.hasSuffix("/index.html") {
            paths.append("/" + file)
        }
        for path in paths { router.add("GET", path, disabled) }
        if section == "demo" {
            router.add("GET", "/demo/api/catalog", disabled)
            router.add("POST", "/demo/api/checkout-sessions", disabled)
            router.add("POST", "/demo/api/sandbox-token", disabled)
        }
    }
}
