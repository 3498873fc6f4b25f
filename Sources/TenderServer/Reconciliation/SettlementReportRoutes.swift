import Crypto
import Foundation
import HTTPServer
import Reconciliation

/// Limits of the report item listing.
enum SettlementItemPaging {
    /// Default page size.
    static let limitDefault = 100
    /// Largest page size.
    static let limitMax = 1_000
    /// Largest offset; deeper pages are refused rather than scanned.
    static let offsetMax = 10_000_000
    /// Default page of `GET /v1/settlement-reports`.
    static let reportsLimitDefault = 20
    /// Largest page of `GET /v1/settlement-reports`.
    static let reportsLimitMax = 100
}

extension TenderApp {
    /// The finance-store effect sink reconciliation uses; the finance store's shell replaces it.
    var settlementEffectSink: any SettlementEffectSink {
        FinanceSettlementSink(processor: configuration.processor.rawValue, logger: logger)
    }

    /// The service that finishes the finance-store effects a stopped import left pending (each
    /// merchant's next import would do it too; this does not wait for one).
    func settlementEffectsService(now: @escaping @Sendable () -> Date) -> SettlementEffectsService {
        SettlementEffectsService(store: SettlementReportStore(pool: pool, sink: settlementEffectSink,
                                                              configuration: configuration.reconciliation),
                                 logger: logger, now: now)
    }

    /// `POST /v1/settlement-reports`, `GET /v1/settlement-reports/{id}`, `…/{id}/items` (openapi.yaml).
    func registerSettlementReportRoutes(into router: inout Router) {
        let store = SettlementReportStore(pool: pool, sink: settlementEffectSink, configuration: configuration.reconciliation)
        router.add("POST", "/v1/settlement-reports", guarded(authenticated { request, merchant in
            try Self.importSettlementReport(request, merchantId: merchant.merchantId, store: store)
        }))
        router.add("GET", "/v1/settlement-reports", guarded(authenticated { request, merchant in
            let limit = try Self.integerParameter(request, "limit", default: SettlementItemPaging.reportsLimitDefault,
                                                  range: 1...SettlementItemPaging.reportsLimitMax)
            let after = request.queryValue("startingAfter")
            // One row more than asked tells whether another page exists.
            guard let page = try store.reports(merchantId: merchant.merchantId, limit: limit + 1, startingAfter: after) else {
                throw SettlementProblems.parameter("startingAfter", "the id of one of your settlement reports")
            }
            struct Page: Encodable { let data: [SettlementReportView]; let hasMore: Bool }
            return .json(Page(data: Array(page.prefix(limit)), hasMore: page.count > limit))
        }))
        router.add("GET", "/v1/settlement-reports/{id}", guarded(authenticated { request, merchant in
            guard let id = request.pathParameters["id"],
                  let report = try store.report(merchantId: merchant.merchantId, reportId: id) else {
                throw SettlementProblems.notFound
            }
            return .json(report)
        }))
        router.add("GET", "/v1/settlement-reports/{id}/items", guarded(authenticated { request, merchant in
            guard let id = request.pathParameters["id"],
                  try store.report(merchantId: merchant.merchantId, reportId: id) != nil else {
                throw SettlementProblems.notFound
            }
            var category: ReconciliationCategory?
            if let text = request.queryValue("category") {
                guard let parsed = ReconciliationCategory(rawValue: text) else {
                    throw SettlementProblems.parameter("category", "one of the categories listed in openapi.yaml")
                }
                category = parsed
            }
            let limit = try Self.integerParameter(request, "limit", default: SettlementItemPaging.limitDefault,
                                                  range: 1...SettlementItemPaging.limitMax)
            let offset = try Self.integerParameter(request, "offset", default: 0,
                                                   range: 0...SettlementItemPaging.offsetMax)
            // One row more than asked tells whether another page exists.
            let page = try store.items(reportId: id, category: category, limit: limit + 1, offset: offset)
            struct Page: Encodable { let data: [SettlementItemView]; let hasMore: Bool }
            return .json(Page(data: Array(page.prefix(limit)), hasMore: page.count > limit))
        }))
    }

    private static func importSettlementReport(_ request: HTTPRequest, merchantId: String,
                                               store: SettlementReportStore) throws -> HTTPResponse {
        guard let formatText = request.queryValue("format"),
              let format = SettlementReportFormat(rawValue: formatText) else {
            throw SettlementProblems.parameter("format", "generic or adyen-sdr")
        }
        var supersede = false
        if let text = request.queryValue("supersede") {
            guard text == "true" || text == "false" else {
                throw SettlementProblems.parameter("supersede", "true or false")
            }
            supersede = text == "true"
        }
        if let type = request.headers["Content-Type"],
           type.split(separator: ";").first?.trimmingCharacters(in: .whitespaces).lowercased() != "text/csv" {
            throw HTTPProblem(status: 415, code: "unsupported_media_type", title: "Unsupported media type",
                              detail: "A settlement report is sent as text/csv.")
        }
        let digest = hexEncoded(Digest.sha256(request.body))
        do {
            let outcome = try store.importReport(
                merchantId: merchantId, format: format, fileSHA256: digest,
                source: ByteArraySource(request.body), supersede: supersede, now: Date())
            var response = HTTPResponse.json(outcome.report, status: outcome.created ? 201 : 200)
            if !outcome.created { response.headers.replaceOrAdd("Idempotent-Replayed", "true") }
            return response
        } catch SettlementImportError.invalidFile(let error) {
            throw SettlementProblems.invalidFile(error)
        } catch SettlementImportError.batchConflict(let batchId, let reportId) {
            throw HTTPProblem(status: 409, code: "settlement_batch_conflict", title: "Batch already imported",
                              detail: "Batch \(batchId) was imported by \(reportId) with other content; "
                                  + "send ?supersede=true to import this file as a new revision.")
        }
    }

    private static func integerParameter(_ request: HTTPRequest, _ name: String, default value: Int,
                                         range: ClosedRange<Int>) throws -> Int {
        guard let text = request.queryValue(name) else { return value }
        guard text.utf8.count <= 9, let number = Int(text), range.contains(number) else {
            throw SettlementProblems.parameter(name, "an integer in \(range.lowerBound)...\(range.upperBound)")
        }
        return number
    }
}

/// Problems of the settlement report endpoints.
enum SettlementProblems {
    static let notFound = HTTPProblem(status: 404, code: "not_found", title: "Not found",
                                      detail: "No such settlement report.")

    static func parameter(_ name: String, _ expected: String) -> HTTPProblem {
        HTTPProblem(status: 400, code: "parameter_invalid", title: "Invalid parameter",
                    detail: "\(name) must be \(expected).",
                    errors: [.init(field: name, code: "parameter_invalid", message: "must be \(expected)")])
    }

    /// 422 naming the first error's line and column; nothing was applied.
    static func invalidFile(_ error: ReconciliationError) -> HTTPProblem {
        HTTPProblem(status: 422, code: "settlement_file_invalid", title: "Invalid settlement file",
                    detail: "The file was refused at line \(error.line), column \(error.column); nothing was applied.",
                    errors: [.init(field: "line \(error.line), column \(error.column)", code: error.code.rawValue,
                                   message: error.description)])
    }
}
