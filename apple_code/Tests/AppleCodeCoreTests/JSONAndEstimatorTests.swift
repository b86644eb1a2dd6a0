import Testing
@testable import AppleCodeCore

@Test func jsonRoundTripKeepsKeyOrder() throws {
    let text = #"{"type":"start","a":[1,2.5,"x\n\u00e9"],"b":{"z":null,"y":true}}"#
    let value = try JSONValue.parse(text)
    #expect(value.jsonText == #"{"type":"start","a":[1,2.5,"x\né"],"b":{"z":null,"y":true}}"#)
}

@Test func estimatorIsConservative() {
    #expect(TokenEstimator.estimate("") == 1)
    #expect(TokenEstimator.estimate(String(repeating: "a", count: 300)) == 101)
    let cut = TokenEstimator.cut(String(repeating: "line\n", count: 1000), toTokens: 100)
    #expect(cut.truncated)
    #expect(TokenEstimator.estimate(cut.text) <= 100)
}
