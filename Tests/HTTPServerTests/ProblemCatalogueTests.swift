import HTTPServer
import Testing

@Suite struct ProblemCatalogueTests {
    @Test func everyCodeHasOneEntry() {
        let codes = ProblemCatalogue.all.map(\.code)
        #expect(Set(codes).count == codes.count)
        for type in ProblemCatalogue.all {
            #expect(!type.title.isEmpty && !type.detail.isEmpty, "\(type.code)")
            #expect((400...599).contains(type.status), "\(type.code)")
            #expect(type.code.allSatisfy { $0.isLowercase || $0 == "_" }, "\(type.code)")
            #expect(ProblemCatalogue.type(code: type.code) == type)
        }
    }

    @Test func aProblemTakesItsTitleAndStatusFromTheCatalogue() {
        let expired = HTTPProblem(.sessionExpired)
        #expect(expired.status == 410 && expired.code == "session_expired" && expired.title == "Checkout session expired")
        #expect(expired.detail == ProblemType.sessionExpired.detail)
        let unknown = HTTPProblem.unknownField("colour")
        #expect(unknown.status == 400 && unknown.errors.map(\.field) == ["colour"])
        #expect(HTTPProblem(.internalError, detail: "x").detail == "x")
    }
}
