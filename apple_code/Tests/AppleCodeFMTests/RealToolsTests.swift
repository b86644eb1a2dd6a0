// Linux only: the seven real tools (AppleCodeTools) in a real temporary workspace, driven through the Foundation
// Models bridge by the mirror's scripted model.
#if !canImport(FoundationModels)
import AppleCodeCore
import AppleCodeTools
import Foundation
import FoundationModelsMirror
import Testing
@testable import AppleCodeFM

@Suite struct RealToolsTests {
    static func workspace() throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("fm-tools-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        try "apples\npears\nplums\n".write(toFile: path + "/fruit.txt", atomically: true, encoding: .utf8)
        return path
    }

    static func request(_ workspace: String, readOnly: Bool = false) -> AgentRequest {
        AgentRequest(prompt: "Count the lines of fruit.txt into count.txt",
                     instructions: BuiltInInstructions.text,
                     tools: standardTools(readOnly: readOnly, allowCommands: true), workspace: workspace)
    }

    @Test func theSevenToolsReadAndWriteTheWorkspace() async throws {
        let workspace = try Self.workspace()
        defer { try? FileManager.default.removeItem(atPath: workspace) }
        let (backend, script) = scriptedBackend([[
            .callTool("readFile", args(#"{"path":"fruit.txt"}"#)),
            .callTool("writeFile", args(#"{"path":"count.txt","content":"3\n"}"#)),
            .snapshots(["Wrote 3 to count.txt."]),
        ]])
        let sink = RecordingSink()
        let answer = try await backend.run(Self.request(workspace), events: sink)

        #expect(answer.text == "Wrote 3 to count.txt.")
        #expect(try String(contentsOfFile: workspace + "/count.txt", encoding: .utf8) == "3\n")
        #expect(answer.progress.filesChanged == ["count.txt"])
        let sent = try #require(script.requests.first)
        #expect(sent.toolNames == ["readFile", "writeFile", "editFile", "listDirectory", "searchFiles",
                                   "searchContent", "runCommand"])
        // Every schema carries the contract's argument names.
        #expect(sent.toolSchemas[0].contains(#""path":{"type":"string""#))
        #expect(sent.toolSchemas[6].contains(#""command":{"type":"string""#))
        #expect(sent.toolExchanges[0].output.contains("pears"))
        #expect(sink.kinds.filter { if case .toolResult(_, _, true, _, _) = $0 { true } else { false } }.count == 2)
    }

    @Test func anEscapingPathIsAnErrorForTheModelAndTheRunGoesOn() async throws {
        let workspace = try Self.workspace()
        defer { try? FileManager.default.removeItem(atPath: workspace) }
        let (backend, script) = scriptedBackend([[
            .callTool("readFile", args(#"{"path":"../../etc/passwd"}"#)), .snapshots(["I cannot read that."]),
        ]])
        let answer = try await backend.run(Self.request(workspace, readOnly: true), events: RecordingSink())
        #expect(answer.text == "I cannot read that.")
        let output = try #require(script.requests.first?.toolExchanges.first?.output)
        #expect(output.hasPrefix("Error:"))
        #expect(!output.contains("root:"))
        #expect(script.requests.first?.toolNames.count == 4)
    }

    @Test func theStandardSetupFitsTheWindow() throws {
        let plan = ContextPlan(window: 4096, instructions: BuiltInInstructions.text,
                               tools: standardTools(readOnly: false, allowCommands: true).map(\.spec))
        try plan.budget.check(task: "Fix the failing test in tests/test_app.py")
        #expect(plan.workingTokens > 2000)
        print("fm budget with the seven tools: \(plan.figures)")
    }
}
#endif
