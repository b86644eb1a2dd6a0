// Linux only: these run the backend on the mirror's scripted model (macOS builds have the real framework).
#if !canImport(FoundationModels)
import AppleCodeCore
import FoundationModelsMirror
import Testing
@testable import AppleCodeFM

@Suite struct StreamingTests {
    @Test func aRunStreamsTextEventsAndAnswersTheLastSnapshot() async throws {
        let (backend, _) = scriptedBackend([[.snapshots(["The", "The README", "The README", "The README says hi"])]])
        let sink = RecordingSink()
        let answer = try await backend.run(request(tools: []), events: sink)
        #expect(sink.texts == ["The", " README", " says hi"])
        #expect(answer.text == "The README says hi")
        #expect(sink.texts.joined() == answer.text)
    }

    @Test func aRevisedSnapshotIsAnnouncedAndSentWhole() async throws {
        let (backend, _) = scriptedBackend([[.snapshots(["Hello wor", "Hi", "Hi!"])]])
        let sink = RecordingSink()
        let answer = try await backend.run(request(tools: []), events: sink)
        #expect(answer.text == "Hi!")
        #expect(sink.kinds == [
            .text(delta: "Hello wor"),
            .notice("the model revised its answer; the text starts again"),
            .text(delta: "Hi"),
            .text(delta: "!"),
        ])
    }

    @Test func optionsCapTheAnswerAndLeaveSamplingAlone() async throws {
        let (backend, script) = scriptedBackend([[.snapshots(["ok"])]])
        _ = try await backend.run(request(tools: []), events: RecordingSink())
        let options = try #require(script.requests.first?.options)
        let plan = ContextPlan(window: 4096, instructions: "You are a careful coding agent.", tools: [])
        #expect(options.maximumResponseTokens == plan.responseTokenLimit)
        #expect(plan.responseTokenLimit == 1500)
        #expect(options.sampling == nil)
        #expect(options.temperature == 0.2)
    }

    @Test func samplingGivenByTheCallerSetsTheTemperatureAndLowersTheLimit() async throws {
        let (backend, script) = scriptedBackend([[.snapshots(["ok"])]])
        var given = request(tools: [])
        given.sampling = Sampling(temperature: 0.7, maxTokens: 40)
        _ = try await backend.run(given, events: RecordingSink())
        let options = try #require(script.requests.first?.options)
        #expect(options.temperature == 0.7)
        #expect(options.maximumResponseTokens == 40)
    }
}
#endif
