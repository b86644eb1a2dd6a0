// Runs on both platforms: against the real framework on a Mac (where the schemas are built by FoundationModels
// itself), against the mirror on Linux. Uses no mirror-only API.
#if canImport(FoundationModels)
import FoundationModels
#else
import FoundationModelsMirror
#endif
import AppleCodeCore
import AppleCodeTools
import Testing
@testable import AppleCodeFM

@Suite struct PlatformTests {
    @Test func availableModelIsReady() {
        let result = FoundationModelsBackend.describe(.available)
        #expect(result.available)
        #expect(result.checkJSON(backend: "fm").jsonText
            == #"{"backend":"fm","available":true,"reason":"Apple's on-device model is ready"}"#)
    }

    @Test(arguments: [
        (SystemLanguageModel.Availability.UnavailableReason.deviceNotEligible, "Apple silicon"),
        (.appleIntelligenceNotEnabled, "turn it on in System Settings > Apple Intelligence & Siri"),
        (.modelNotReady, "wait a few minutes"),
    ])
    func unavailableReasonsSayWhatToDo(reason: SystemLanguageModel.Availability.UnavailableReason, advice: String) {
        let result = FoundationModelsBackend.describe(.unavailable(reason))
        #expect(!result.available)
        #expect(result.reason.contains(advice))
        #expect(result.checkJSON(backend: "fm")["available"] == .bool(false))
    }

    @Test func theSevenToolSchemasBuild() throws {
        for tool in standardTools(readOnly: false, allowCommands: true) {
            let schema = try FrameworkTool.schema(for: tool.spec).debugDescription
            for parameter in tool.spec.parameters {
                #expect(schema.contains(parameter.name), "\(tool.spec.name) schema lacks \(parameter.name)")
            }
        }
    }
}
