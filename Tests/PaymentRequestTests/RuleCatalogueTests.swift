import Foundation
import Testing
@testable import PaymentRequest

@Suite struct RuleCatalogueTests {
    static let document = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("docs/apple-pay-rules.md")

    @Test func everyRuleTheValidatorCitesIsDescribed() {
        let described = Set(RequestRuleCatalogue.rules.filter { !$0.summary.isEmpty && !$0.enforcedBy.isEmpty }.map(\.number))
        for check in RequestValidator.checks {
            #expect(described.contains(check.rule), "rule \(check.rule) (\(check.name)) has no line in the catalogue")
        }
        for number in RequestRuleCatalogue.enforcedElsewhere.keys {
            #expect(described.contains(number), "rule \(number)")
        }
    }

    @Test func docsAppleRulesIsCurrent() throws {
        let committed = try String(contentsOf: Self.document, encoding: .utf8)
        #expect(committed == RequestRuleCatalogue.markdown(),
                "docs/apple-pay-rules.md is stale: run `tender docs apple-pay-rules > docs/apple-pay-rules.md`")
    }
}
