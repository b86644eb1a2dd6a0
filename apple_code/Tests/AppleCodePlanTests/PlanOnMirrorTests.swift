// The plan on the Foundation Models backend, driven by the Linux mirror's scripted model: only where the real
// framework is absent (the mirror's scripting exists only there).
#if !canImport(FoundationModels)
import AppleCodeCore
import AppleCodeTools
import Foundation
import FoundationModelsMirror
import Testing
@testable import AppleCodeFM
@testable import AppleCodePlan

@Suite struct PlanOnMirrorTests {
    private func content(_ json: String) throws -> GeneratedContent { try GeneratedContent(json: json) }

    /// One worker turn on the mirror: read the file, fix it with the real editFile tool, answer.
    private func fixTurn(_ name: String) throws -> [MirrorStep] {
        let letter = name.prefix(1).uppercased()
        return [
            .callTool("readFile", try content(#"{"path": "\#(name)"}"#)),
            .callTool("editFile", try content(
                #"{"path": "\#(name)", "oldText": "helo \#(letter)", "newText": "hello \#(letter)"}"#)),
            .snapshots(["Fixed ", "Fixed the typo in \(name)."]),
        ]
    }

    @Test func threeWorkersEachGetTheirOwnSessionAndEditTheirFile() async throws {
        let workspace = FileManager.default.temporaryDirectory
            .appendingPathComponent("plan-mirror-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: workspace, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: workspace) }
        for name in ["a.py", "b.py", "c.py"] {
            let letter = name.prefix(1).uppercased()
            try "print('helo \(letter)')  # CONTENT-\(letter)\n"
                .write(toFile: workspace + "/" + name, atomically: true, encoding: .utf8)
        }
        let script = MirrorScript([
            [.snapshots([#"["Fix the typo in a.py", "Fix the typo in b.py", "Fix the typo in c.py"]"#])],
            try fixTurn("a.py"), try fixTurn("b.py"), try fixTurn("c.py"),
            [.snapshots(["All three typos are fixed."])],
        ])
        let backend = FoundationModelsBackend(contextTokens: 4096,
                                              languageModel: SystemLanguageModel(script: script))
        let request = AgentRequest(prompt: "Fix the greeting typos in a.py, b.py and c.py.",
                                   instructions: "You are a coding agent.",
                                   tools: standardTools(readOnly: false, allowCommands: false),
                                   workspace: workspace, maxTurns: 16, contextTokens: 4096,
                                   // Far: the run's time is not under test, and on a loaded machine the
                                   // planner's quarter of a minute was gone before it was read.
                                   deadline: .now + .seconds(600))
        let events = EventLog()
        let result = try await PlanRunner(backend: backend).run(request, events: events)

        let sent = script.requests
        try #require(sent.count == 5)
        #expect(Set(sent[0].toolNames) == ["readFile", "listDirectory", "searchFiles", "searchContent"])
        for (position, name) in ["a.py", "b.py", "c.py"].enumerated() {
            let worker = sent[position + 1]
            // A session of its own: its prompt is its subtask, and it saw only its own file.
            #expect(worker.prompt.contains("Your subtask: Fix the typo in \(name)"))
            #expect(worker.toolExchanges.map(\.name) == ["readFile", "editFile"])
            let shown = worker.toolExchanges.map(\.output).joined()
            for other in ["A", "B", "C"] {
                #expect(shown.contains("CONTENT-\(other)") == (other == name.prefix(1).uppercased()))
            }
            let text = try String(contentsOfFile: workspace + "/" + name, encoding: .utf8)
            #expect(text.contains("hello \(name.prefix(1).uppercased())"))
        }
        #expect(sent[3].prompt.contains("2. Fix the typo in b.py: Fixed the typo in b.py. (changed: b.py)"))
        #expect(sent[4].toolNames.isEmpty)

        #expect(result.progress.filesChanged == ["a.py", "b.py", "c.py"])
        #expect(result.text.contains("1. Fix the typo in a.py\nFixed the typo in a.py."))
        #expect(result.text.hasSuffix("Summary: All three typos are fixed."))
        let toolCallSubtasks = events.events.compactMap { event -> Int? in
            if case .toolCall = event.kind { event.subtask } else { nil }
        }
        #expect(toolCallSubtasks == [1, 1, 2, 2, 3, 3])
    }
}
#endif
