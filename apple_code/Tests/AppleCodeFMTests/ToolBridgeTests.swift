// Linux only: these run the backend on the mirror's scripted model (macOS builds have the real framework).
#if !canImport(FoundationModels)
import AppleCodeCore
import FoundationModelsMirror
import Testing
@testable import AppleCodeFM

@Suite struct ToolBridgeTests {
    @Test func schemaComesFromTheSameParameterSpec() throws {
        let spec = ToolSpec(name: "readFile", description: "Read a file", parameters: [
            ParameterSpec("path", .string, "file path"),
            ParameterSpec("startLine", .integer, "first line", required: false),
            ParameterSpec("recursive", .boolean, "recurse", required: false),
        ])
        let schema = try FrameworkTool.schema(for: spec).debugDescription
        #expect(schema.contains(#""title":"readFileArguments""#))
        #expect(schema.contains(#""path":{"type":"string","description":"file path"}"#))
        #expect(schema.contains(#""startLine":{"type":"integer","description":"first line"}"#))
        #expect(schema.contains(#""recursive":{"type":"boolean""#))
        #expect(schema.contains(#""required":["path"]"#))
        #expect(schema.contains(#""x-order":["path","startLine","recursive"]"#))
    }

    @Test func aSchemaErrorIsABackendErrorBeforeAnyRequest() async {
        let tool = FakeTool("readFile", [ParameterSpec("path", .string, "a"), ParameterSpec("path", .string, "b")])
        let (backend, script) = scriptedBackend([])
        let error = await runFailure(backend, request(tools: [tool]))
        #expect(error?.outcome == .backendError)
        #expect(error?.message.contains("schema") == true)
        #expect(script.requests.isEmpty)
    }

    @Test func toolCallsRunTheToolAndEmitEventsFromInsideCall() async throws {
        let write = FakeTool("writeFile", [ParameterSpec("path", .string, "p"), ParameterSpec("content", .string, "c")]) {
            ToolResult(text: "wrote 5 bytes to \($0.string("path") ?? "")", summary: "wrote a.py", filesChanged: ["a.py"])
        }
        let (backend, script) = scriptedBackend([[
            .callTool("writeFile", args(#"{"content":"x = 1","path":"a.py"}"#)),
            .snapshots(["Done", "Done: a.py fixed."]),
        ]])
        let sink = RecordingSink()
        let answer = try await backend.run(request(tools: [write]), events: sink)

        #expect(answer.text == "Done: a.py fixed.")
        #expect(answer.progress.filesChanged == ["a.py"])
        #expect(answer.progress.turns == 2)
        #expect(answer.progress.usage.estimated)
        #expect(write.arguments == [ToolArguments(["path": .string("a.py"), "content": .string("x = 1")])])
        #expect(sink.kinds == [
            .toolCall(id: "c1", name: "writeFile", arguments: .object(["content": "x = 1", "path": "a.py"])),
            .toolResult(id: "c1", name: "writeFile", ok: true, summary: "wrote a.py", truncated: false),
            .text(delta: "Done"),
            .text(delta: ": a.py fixed."),
        ])
        #expect(sink.details[1] == ToolResultDetail(output: "wrote 5 bytes to a.py"))
        let sent = try #require(script.requests.first)
        #expect(sent.toolNames == ["writeFile"])
        #expect(sent.instructions == "You are a careful coding agent.")
        #expect(sent.prompt == "Fix the bug in a.py")
        #expect(sent.toolExchanges.map(\.output) == ["wrote 5 bytes to a.py"])
    }

    @Test func missingArgumentIsAnErrorStringForTheModelNotAThrow() async throws {
        let read = FakeTool("readFile")
        let (backend, script) = scriptedBackend([[.callTool("readFile", args("{}")), .snapshots(["Sorry"])]])
        let sink = RecordingSink()
        let answer = try await backend.run(request(tools: [read]), events: sink)
        #expect(answer.text == "Sorry")
        #expect(read.arguments.isEmpty)
        let output = try #require(script.requests.first?.toolExchanges.first?.output)
        #expect(output == "Error: readFile: missing required argument 'path'")
        #expect(sink.kinds.contains(.toolResult(id: "c1", name: "readFile", ok: false, summary: output,
                                                truncated: false)))
    }

    @Test func mistypedArgumentIsAnErrorStringForTheModel() async throws {
        let read = FakeTool("readFile", [ParameterSpec("path", .string, "p"),
                                         ParameterSpec("startLine", .integer, "n", required: false)])
        let (backend, script) = scriptedBackend([[
            .callTool("readFile", args(#"{"path":"a.py","startLine":"ten"}"#)), .snapshots(["ok"]),
        ]])
        _ = try await backend.run(request(tools: [read]), events: RecordingSink())
        #expect(read.arguments.isEmpty)
        #expect(script.requests.first?.toolExchanges.first?.output
            == "Error: readFile: argument 'startLine' must be an integer")
    }

    @Test func toolOutputIsCutToTheBudget() async throws {
        let big = String(repeating: "0123456789abcdef\n", count: 4000)
        let read = FakeTool("readFile") { _ in ToolResult(text: big, summary: "a.py lines 1-4000 of 4000") }
        let (backend, script) = scriptedBackend([[.callTool("readFile", args(#"{"path":"a.py"}"#)), .snapshots(["ok"])]])
        let sink = RecordingSink()
        _ = try await backend.run(request(tools: [read]), events: sink)

        let plan = ContextPlan(window: 4096, instructions: "You are a careful coding agent.", tools: [read.spec])
        let budget = try #require(read.budgets.first)
        #expect(budget <= plan.resultCap)
        let output = try #require(script.requests.first?.toolExchanges.first?.output)
        #expect(TokenEstimator.estimate(output) <= budget)
        #expect(output.contains("cut to fit the context budget"))
        #expect(sink.kinds.contains(.toolResult(id: "c1", name: "readFile", ok: true,
                                                summary: "a.py lines 1-4000 of 4000", truncated: true)))
    }

    @Test func laterResultsGetWhatTheWindowHasLeft() async throws {
        let big = String(repeating: "x", count: 30_000)
        let read = FakeTool("readFile") { _ in ToolResult(text: big, summary: "big") }
        let call = MirrorStep.callTool("readFile", args(#"{"path":"a.py"}"#))
        let (backend, _) = scriptedBackend([[call, call, call, .snapshots(["ok"])]])
        _ = try await backend.run(request(tools: [read]), events: RecordingSink())
        let budgets = read.budgets
        #expect(budgets.count == 3)
        #expect(budgets[1] < budgets[0])
        #expect(budgets[2] == 32)
    }

    @Test func generatedContentBecomesOrderedJSON() {
        let content = GeneratedContent(properties: ["path": "a.py", "recursive": true, "depth": 2])
        #expect(JSONValue(content).jsonText == #"{"path":"a.py","recursive":true,"depth":2}"#)
        #expect(JSONValue(GeneratedContent(kind: .array([GeneratedContent(kind: .null)]))) == .array([.null]))
    }
}
#endif
