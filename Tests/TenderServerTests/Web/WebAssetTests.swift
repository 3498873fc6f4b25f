import Foundation
import HTTPServer
import Testing
@testable import TenderServer

/// The embedded browser client (web/ → EmbeddedWebFiles.swift) and how it is served; no database.
@Suite struct WebAssetTests {
    /// Every file under web/, by its path relative to web/.
    static func webFolder() throws -> [String: [UInt8]] {
        let root = TestEnvironment.packageRoot + "/web"
        guard let walker = FileManager.default.enumerator(atPath: root) else {
            throw TenderError("test_no_web", "web/ is missing")
        }
        var files: [String: [UInt8]] = [:]
        for case let relative as String in walker {
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: root + "/" + relative, isDirectory: &isDirectory),
                  !isDirectory.boolValue else { continue }
            files[relative] = [UInt8](try Data(contentsOf: URL(fileURLWithPath: root + "/" + relative)))
        }
        return files
    }

    @Test func embeddedFilesAreExactlyTheWebFolder() throws {
        let folder = try Self.webFolder()
        #expect(Set(folder.keys) == Set(WebAssets.byFile.keys), "run scripts/embed-web.sh after changing web/")
        for (file, bytes) in folder {
            #expect(WebAssets.byFile[file]?.body == bytes, "web/\(file) changed since scripts/embed-web.sh ran")
        }
        #expect(folder["tender.js"] != nil && folder["demo/index.html"] != nil && folder["console/index.html"] != nil)
    }

    @Test func everyFileHasItsContentType() {
        for asset in WebAssets.byFile.values {
            #expect(asset.contentType != "application/octet-stream", "no content type for \(asset.file)")
        }
        #expect(WebAssets.byFile["tender.js"]?.contentType == "text/javascript; charset=utf-8")
        #expect(WebAssets.byFile["demo/index.html"]?.contentType == "text/html; charset=utf-8")
        #expect(WebAssets.byFile["console/console.css"]?.contentType == "text/css; charset=utf-8")
    }

    /// The CSP forbids inline script and style: no page may need them.
    @Test func pagesHaveNoInlineScriptOrStyle() throws {
        for (file, asset) in WebAssets.byFile where file.hasSuffix(".html") {
            let html = String(decoding: asset.body, as: UTF8.self)
            #expect(!html.contains("<style"), "\(file) has a <style> element")
            #expect(!html.contains(" style="), "\(file) has a style attribute")
            let handler = try NSRegularExpression(pattern: "\\son[a-z]+\\s*=|javascript:")
            #expect(handler.firstMatch(in: html, range: NSRange(html.startIndex..., in: html)) == nil,
                    "\(file) has an inline event handler or a javascript: URL")
            for match in html.components(separatedBy: "<script").dropFirst() {
                #expect(match.hasPrefix(" type=\"module\" src=\"/"), "\(file) has an inline or foreign script")
            }
            #expect(!html.contains("http://") && !html.contains("https://"), "\(file) loads from another origin")
        }
    }

    @Test(arguments: [
        ("\"abc\"", "\"abc\"", true),
        ("W/\"abc\"", "\"abc\"", true),
        ("\"x\", \"abc\"", "\"abc\"", true),
        ("*", "\"abc\"", true),
        ("\"abd\"", "\"abc\"", false),
        ("abc", "\"abc\"", false),
        ("", "\"abc\"", false),
    ])
    func ifNoneMatchComparison(header: String, etag: String, matches: Bool) {
        #expect(WebAssets.matches(header, etag: etag) == matches)
    }

    @Test func responsesCarryTheSecurityHeadersAndRevalidate() throws {
        let asset = try #require(WebAssets.byFile["demo/demo.js"])
        let ok = WebAssets.response(asset, request: HTTPRequest(method: "GET", path: "/demo/demo.js"))
        #expect(ok.status == 200)
        #expect(ok.body == asset.body)
        #expect(ok.headers["Content-Security-Policy"]?.contains("default-src 'self'") == true)
        #expect(ok.headers["Content-Security-Policy"]?.contains("frame-ancestors 'none'") == true)
        #expect(ok.headers["Content-Security-Policy"]?.contains("unsafe-inline") == false)
        #expect(ok.headers["X-Content-Type-Options"] == "nosniff")
        #expect(ok.headers["Referrer-Policy"] == "no-referrer")
        #expect(ok.headers["Cache-Control"] == "no-cache")
        #expect(ok.headers["Access-Control-Allow-Origin"] == nil)
        let etag = try #require(ok.headers["ETag"])
        let again = WebAssets.response(asset, request: HTTPRequest(method: "GET", path: "/demo/demo.js",
                                                                   headers: HTTPHeaders([("If-None-Match", etag)])))
        #expect(again.status == 304)
        #expect(again.body.isEmpty)
        #expect(again.headers["X-Content-Type-Options"] == "nosniff")
    }

    @Test func demoNeedsASandboxConfiguration() throws {
        #expect {
            _ = try TenderConfiguration.load(environment: ["TENDER_DEMO": "on"])
        } throws: { ($0 as? ConfigurationError)?.variable == "TENDER_DEMO" }
        #expect {
            _ = try TenderConfiguration.load(environment: ["TENDER_DEMO": "yes"])
        } throws: { ($0 as? ConfigurationError)?.variable == "TENDER_DEMO" }
        #expect {
            _ = try TenderConfiguration.load(environment: ["TENDER_CONSOLE": "1"])
        } throws: { ($0 as? ConfigurationError)?.variable == "TENDER_CONSOLE" }
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("tender-root-\(UUID().uuidString).pem").path
        try Data("not checked at load".utf8).write(to: URL(fileURLWithPath: root))
        defer { try? FileManager.default.removeItem(atPath: root) }
        let sandbox = try TenderConfiguration.load(environment: ["TENDER_DEMO": "on", "TENDER_APPLE_ROOTS": root])
        #expect(sandbox.demoEnabled && sandbox.isSandbox)
        let defaults = try TenderConfiguration.load(environment: [:])
        #expect(!defaults.demoEnabled && defaults.consoleEnabled && !defaults.isSandbox)
        #expect(try !TenderConfiguration.load(environment: ["TENDER_CONSOLE": "off"]).consoleEnabled)
    }
}

/// The demo store's cart rules, most important first.
@Suite struct DemoCatalogTests {
    @Test(arguments: [
        ([] as [(String, Int)], "cart_empty", "items"),
        ([("lamp", 1)], "unknown_sku", "items[0].sku"),
        ([("mug", 1), ("mug", 2)], "duplicate_sku", "items[1].sku"),
        ([("mug", 0)], "quantity_out_of_range", "items[0].quantity"),
        ([("mug", 11)], "quantity_out_of_range", "items[0].quantity"),
        ([("mug", -1)], "quantity_out_of_range", "items[0].quantity"),
        ([("mug", 1), ("tee", 1), ("stickers", 1), ("mug", 1)], "too_many_items", "items"),
    ])
    func refusedOrders(items: [(String, Int)], code: String, field: String) {
        let result = DemoCatalog.cart(for: items.map { DemoCatalog.Item(sku: $0.0, quantity: $0.1) })
        guard case .failure(let error) = result else {
            Issue.record("accepted \(items)")
            return
        }
        #expect(error.code == code)
        #expect(error.field == field)
    }

    @Test func cartFromTheCatalogPrices() throws {
        let result = DemoCatalog.cart(for: [.init(sku: "mug", quantity: 10), .init(sku: "stickers", quantity: 1)])
        guard case .success(let cart) = result else {
            Issue.record("refused")
            return
        }
        // 10 × 12.00 and 1 × 4.99, worked out by hand.
        #expect(cart.lineItems.map(\.amount) == ["120.00", "4.99"])
        #expect(cart.lineItems.map(\.label) == ["Tender mug × 10", "Sticker pack"])
        #expect(cart.shippingMethods.map(\.identifier) == ["standard", "express"])
        #expect(cart.supportsCouponCode && cart.apiVersion >= 12)
    }
}
