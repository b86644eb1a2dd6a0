import AppleCodeCore
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Testing
@testable import AppleCodeAgent

@Suite struct OpenAIWireTests {
    func response(_ status: Int, _ body: String) -> HTTPClient.Response {
        HTTPClient.Response(status: status, body: Data(body.utf8))
    }

    @Test func parsesToolCallsWithNullContentAndUsage() throws {
        let body = #"{"choices":[{"message":{"role":"assistant","content":null,"tool_calls":[{"id":"q","type":"function","function":{"name":"readFile","arguments":"{\"path\":\"a\"}"}},{"function":{"name":"listDirectory","arguments":{"path":"."}}}]}}],"usage":{"prompt_tokens":10,"completion_tokens":3}}"#
        let reply = try OpenAIChatModel.parseReply(response(200, body), url: "u")
        #expect(reply.text == "")
        #expect(reply.calls == [ModelToolCall(id: "q", name: "readFile", argumentsText: #"{"path":"a"}"#),
                                ModelToolCall(id: "", name: "listDirectory", argumentsText: #"{"path":"."}"#)])
        #expect(reply.promptTokens == 10 && reply.completionTokens == 3)
    }

    @Test func contentAsPartsIsJoined() throws {
        let body = #"{"choices":[{"message":{"content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}}]}"#
        #expect(try OpenAIChatModel.parseReply(response(200, body), url: "u").text == "ab")
    }

    @Test func errorsSayWhatCameBack() {
        let cases: [(Int, String, String)] = [
            (503, "overloaded", "HTTP 503"), (200, "<html>", "not JSON"),
            (200, #"{"error":{"message":"no model"}}"#, "no model"), (200, #"{"id":1}"#, "without choices"),
            (401, "no", "--api-key"),
        ]
        for (status, body, expected) in cases {
            do {
                _ = try OpenAIChatModel.parseReply(response(status, body), url: "u")
                Issue.record("expected an error for \(body)")
            } catch let error as AgentError {
                #expect(error.outcome == .backendError)
                #expect(error.message.contains(expected))
            } catch { Issue.record("unexpected \(error)") }
        }
    }

    @Test func requestBodyHasSystemMessageToolChoiceAutoAndNoNullContent() {
        let spec = ToolSpec(name: "readFile", description: "Read.", parameters: [ParameterSpec("path", .string, "p")])
        let chat = ChatRequest(system: "sys", entries: [
            .user("task"), .assistant(text: "", calls: [ModelToolCall(id: "1", name: "readFile", argumentsText: "{}")]),
            .toolResult(id: "1", name: "readFile", text: "body", summary: "s", condensed: false),
        ], tools: [spec], maxTokens: 99, style: .toolMessages)
        let model = OpenAIChatModel(endpoint: OpenAIEndpoint(baseURL: "http://h/v1/"), model: "m", deadline: nil)
        let body = model.body(chat)
        #expect(body["tool_choice"] == "auto")
        #expect(body["max_tokens"] == 99)
        let messages = body["messages"]?.arrayValue ?? []
        #expect(messages.map { $0["role"]?.stringValue ?? "" } == ["system", "user", "assistant", "tool"])
        #expect(messages[2]["content"] == "")
        #expect(chat.estimatedTokens == TokenEstimator.estimate(chat.messagesJSON.jsonText)
            + TokenEstimator.estimate(chat.toolsJSON.jsonText) + 99)
    }

    @Test func condensedResultsAreOneLineAndFoldedStyleUsesUserMessages() {
        let chat = ChatRequest(system: "s", entries: [
            .user("t"), .assistant(text: "", calls: []),
            .toolResult(id: "1", name: "readFile", text: "long\ntext", summary: "readFile: a.py lines 1-9", condensed: true),
            .toolResult(id: "2", name: "listDirectory", text: "x", summary: "", condensed: false),
        ], tools: [], maxTokens: 1, style: .userMessages)
        let messages = chat.messagesJSON.arrayValue ?? []
        #expect(messages.count == 4)
        #expect(messages[3]["role"] == "user")
        #expect(messages[3]["content"] == .string("Result of readFile:\n[condensed to save context] "
            + "readFile: a.py lines 1-9\n\nResult of listDirectory:\nx"))
    }

    @Test func plainHistoryKeepsWhatWasSaidAndFoldsResultsWithoutCalls() {
        let chat = ChatRequest(system: "s", entries: [
            .user("t"), .assistant(text: "", calls: [ModelToolCall(id: "1", name: "readFile", argumentsText: "{}")]),
            .toolResult(id: "1", name: "readFile", text: "body", summary: "readFile: a.py lines 1-1 of 1", condensed: false),
            .assistant(text: "Looking further.", calls: [ModelToolCall(id: "2", name: "listDirectory", argumentsText: "{}")]),
            .toolResult(id: "2", name: "listDirectory", text: "a.py", summary: "", condensed: false),
            .user("Answer now."),
        ], tools: [], maxTokens: 1, style: .toolMessages, plainHistory: true)
        let messages = chat.messagesJSON.arrayValue ?? []
        #expect(messages.map { $0["role"]?.stringValue ?? "" } == ["system", "user", "user", "assistant", "user", "user"])
        #expect(messages[2]["content"] == "a.py lines 1-1 of 1:\nbody")  // headed by what it holds, not "Result of"
        #expect(messages[3] == ["role": "assistant", "content": "Looking further."])
        #expect(messages[4]["content"] == "Result of listDirectory:\na.py")
        #expect(!chat.messagesJSON.jsonText.contains("tool_calls"))
    }

    @Test func connectionRefusedIsModelUnavailableNamingTheURL() async throws {
        // Port 9 (discard) on loopback: nothing listens there.
        let model = OpenAIChatModel(endpoint: OpenAIEndpoint(baseURL: "http://127.0.0.1:9/v1"), model: "m", deadline: nil)
        let chat = ChatRequest(system: "s", entries: [.user("t")], tools: [], maxTokens: 1, style: .toolMessages)
        do {
            _ = try await model.complete(chat) { _ in }
            Issue.record("expected unavailable")
        } catch let error as AgentError {
            #expect(error.outcome == .modelUnavailable)
            #expect(error.message.contains("http://127.0.0.1:9/v1"))
            #expect(error.message.contains("scripts/local-model.sh start"))
        }
    }
}

@Suite struct TCPProbeTests {
    /// A socket listening on a free loopback port (the kernel accepts connections to it; nobody answers).
    func listening() throws -> (fd: Int32, port: Int) {
        #if os(Linux)
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #else
        let fd = socket(AF_INET, SOCK_STREAM, 0)
        #endif
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        try withUnsafeMutablePointer(to: &address) { pointer in
            try pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { raw in
                guard bind(fd, raw, length) == 0, listen(fd, 4) == 0, getsockname(fd, raw, &length) == 0 else {
                    throw AgentError(.backendError, "cannot listen")
                }
            }
        }
        return (fd, Int(UInt16(bigEndian: address.sin_port)))
    }

    @Test func aListeningServerAcceptsAndNothingElseDoes() async throws {
        let server = try listening()
        defer { close(server.fd) }
        #expect(await TCPProbe.accepts(host: "127.0.0.1", port: server.port, timeout: 3))
        #expect(await TCPProbe.accepts(host: "localhost", port: server.port, timeout: 3))
        #expect(!(await TCPProbe.accepts(host: "127.0.0.1", port: 9, timeout: 3)))  // discard: nobody listens
        #expect(!(await TCPProbe.accepts(host: "no-such-host.invalid", port: 80, timeout: 3)))
    }
}
