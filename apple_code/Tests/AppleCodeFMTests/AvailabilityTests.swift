// Linux only: these run the backend on the mirror's scripted model (macOS builds have the real framework).
#if !canImport(FoundationModels)
import AppleCodeCore
import FoundationModelsMirror
import Testing
@testable import AppleCodeFM

@Suite struct AvailabilityTests {
    @Test func runOnUnavailableModelIsExit3AndSendsNothing() async {
        let (backend, script) = scriptedBackend([[.snapshots(["never"])]],
                                                availability: .unavailable(.appleIntelligenceNotEnabled))
        #expect(await backend.availability().available == false)
        let error = await runFailure(backend, request())
        #expect(error?.outcome == .modelUnavailable)
        #expect(error?.outcome.exitCode == 3)
        #expect(error?.message.contains("Apple Intelligence is turned off") == true)
        #expect(script.requests.isEmpty)
    }

    @Test func buildWithoutTheFrameworkIsNeverAvailable() async {
        let backend = FoundationModelsBackend()
        let result = await backend.availability()
        #expect(!result.available)
        #expect(result.reason.contains("macOS 26"))
        #expect(backend.contextTokens == 4096)
        #expect(FoundationModelsBackend(contextTokens: 2000).contextTokens == 2000)
    }
}
#endif
