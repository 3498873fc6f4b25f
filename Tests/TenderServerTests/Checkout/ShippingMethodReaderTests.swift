import Testing
@testable import TenderServer

/// The shipping-method body read without `JSONDecoder` agrees with the decoder wherever it answers, and
/// leaves every other body to it.
struct ShippingMethodReaderTests {
    private func decoded(_ text: String) -> String? {
        try? StrictBody<ShippingMethodBody>.decode(Array(text.utf8)).shippingMethod.identifier
    }

    private func fast(_ text: String) -> String? { ShippingMethodBody.identifier(strictlyReading: Array(text.utf8)) }

    @Test func theShapesApplePayJSSendsAreReadAsTheDecoderReadsThem() {
        let bodies = [
            #"{"shippingMethod":{"identifier":"express"}}"#,
            #" { "shippingMethod" : { "label" : "Express", "detail": "1-2 days", "amount": "14.99", "#
                + #""identifier": "express" } } "#,
            #"{"shippingMethod":{"identifier":"exp\u0072ess","dateComponentsRange":{"startDateComponents":{"days":1}},"#
                + #""x":[1,2.5e3,true,null]}}"#,
            #"{"shippingMethod":{"identifier":""}}"#,
        ]
        for body in bodies {
            #expect(fast(body) != nil, "\(body)")
            #expect(fast(body) == decoded(body), "\(body)")
        }
        #expect(fast(bodies[2]) == "express")
    }

    @Test func everythingElseIsLeftToTheDecoder() {
        let bodies = [
            #"{"shippingMethod":{"label":"Express"}}"#,
            #"{"shippingMethod":{"identifier":7}}"#,
            #"{"shippingMethod":{"identifier":null}}"#,
            #"{"shippingMethod":"express"}"#,
            #"{"shippingMethod":{"identifier":"express"},"amount":"1.00"}"#,
            #"{"amount":"1.00","shippingMethod":{"identifier":"express"}}"#,
            #"{"shippingMethod":{"identifier":"express",}}"#,
            #"{"shippingMethod":{"identifier":"express"}} x"#,
            #"{"shippingMethod":{"identifier":"express"}"#,
            #"[]"#,
            "\u{FEFF}" + #"{"shippingMethod":{"identifier":"express"}}"#,
        ]
        for body in bodies { #expect(fast(body) == nil, "\(body)") }
    }
}
