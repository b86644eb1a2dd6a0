import AppleCodeCore
import Foundation
import Testing
@testable import AppleCodeAgent

@Suite struct ServerSentEventsTests {
    @Test func payloadsSplitAnywhereIncludingInsideACharacter() {
        let body = "data: {\"a\":\"é\"}\n\n: ping\n\nevent: x\r\ndata: one\r\ndata: two\r\n\r\ndata: [DONE]\n\n"
        let bytes = Array(body.utf8)
        for size in [1, 2, 3, 7, bytes.count] {
            var events = ServerSentEvents()
            var payloads: [String] = []
            var start = 0
            while start < bytes.count {
                let end = min(bytes.count, start + size)
                payloads += events.feed(Data(bytes[start..<end]))
                start = end
            }
            payloads += events.finish()
            #expect(payloads == ["{\"a\":\"é\"}", "one\ntwo", "[DONE]"], "piece size \(size)")
        }
    }

    @Test func anEventTheStreamEndsInWithoutABlankLineCounts() {
        var events = ServerSentEvents()
        #expect(events.feed(Data("data: last".utf8)).isEmpty)
        #expect(events.finish() == ["last"])
    }
}

@Suite struct ChatStreamAssemblerTests {
    func assemble(_ payloads: [String]) throws -> (ChatStreamAssembler, [String]) {
        var assembler = ChatStreamAssembler()
        var pieces: [String] = []
        for payload in payloads {
            let piece = try assembler.add(payload, url: "u")
            if !piece.isEmpty { pieces.append(piece) }
        }
        return (assembler, pieces)
    }

    @Test func textPiecesToolCallDeltasByIndexUsageAndDone() throws {
        let (assembler, pieces) = try assemble([
            #"{"choices":[{"delta":{"role":"assistant","content":""}}]}"#,
            #"{"choices":[{"delta":{"content":"Look"}}]}"#,
            #"{"choices":[{"delta":{"content":"ing."}}]}"#,
            #"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"a","type":"function","function":{"name":"readFile","arguments":""}}]}}]}"#,
            #"{"choices":[{"delta":{"tool_calls":[{"index":1,"id":"b","function":{"name":"listDirectory","arguments":"{}"}}]}}]}"#,
            #"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"path\":"}}]}}]}"#,
            #"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"a.py\"}"}}]}}]}"#,
            #"{"choices":[{"delta":{},"finish_reason":"tool_calls"}]}"#,
            #"{"choices":[],"usage":{"prompt_tokens":120,"completion_tokens":9}}"#,
            "[DONE]",
        ])
        #expect(pieces == ["Look", "ing."])
        #expect(assembler.done)
        #expect(assembler.reply == ChatReply(text: "Looking.", calls: [
            ModelToolCall(id: "a", name: "readFile", argumentsText: #"{"path":"a.py"}"#),
            ModelToolCall(id: "b", name: "listDirectory", argumentsText: "{}"),
        ], promptTokens: 120, completionTokens: 9))
    }

    @Test func callsWithoutIndexWholeMessagesAndObjectArguments() throws {
        let (assembler, _) = try assemble([
            #"{"choices":[{"delta":{"tool_calls":[{"id":"x","function":{"name":"readFile","arguments":"{\"pa"}}]}}]}"#,
            #"{"choices":[{"delta":{"tool_calls":[{"function":{"arguments":"th\":\"a\"}"}}]}}]}"#,
            #"{"choices":[{"message":{"content":"ok","tool_calls":[{"id":"y","function":{"name":"listDirectory","arguments":{"path":"."}}}]}}]}"#,
        ])
        #expect(assembler.reply.calls == [
            ModelToolCall(id: "x", name: "readFile", argumentsText: #"{"path":"a"}"#),
            ModelToolCall(id: "y", name: "listDirectory", argumentsText: #"{"path":"."}"#),
        ])
        #expect(assembler.reply.text == "ok")
        #expect(!assembler.done && assembler.chunks == 3)
    }

    @Test func anErrorEventOrAnEventThatIsNotJSONSaysWhatCame() {
        for (payload, expected) in [(#"{"error":{"message":"context full"}}"#, "context full"),
                                    ("<html>", "not JSON: <html>")] {
            var assembler = ChatStreamAssembler()
            do {
                _ = try assembler.add(payload, url: "http://h/v1/chat/completions")
                Issue.record("expected an error for \(payload)")
            } catch let error as AgentError {
                #expect(error.outcome == .backendError)
                #expect(error.message.contains(expected) && error.message.contains("http://h/v1"))
            } catch { Issue.record("unexpected \(error)") }
        }
    }
}

@Suite struct TextRelayTests {
    func relay(_ pieces: [String]) -> (shown: [String], held: String) {
        var relay = TextRelay()
        let shown = pieces.map { relay.pass($0) }.filter { !$0.isEmpty }
        return (shown, relay.release())
    }

    @Test func textShowsAsItComesOnceItCannotBeACall() {
        let (shown, held) = relay(["f", "ile a.py", " says hi."])
        #expect(shown == ["file a.py", " says hi."])
        #expect(held.isEmpty)
    }

    @Test func aCallWrittenAsTextIsHeldToTheEnd() {
        for pieces in [["func", "tions.list", "Directory:", "\n{ }"], ["```json\n{\"name\"", ": \"readFile\"}\n```"],
                       ["  {", "\"name\": 1}"], ["<tool", "_call>\n{\"name\"", "}</tool_call>"]] {
            let (shown, held) = relay(pieces)
            #expect(shown.isEmpty, "\(pieces)")
            #expect(held == pieces.joined())
        }
        #expect(relay(["```", "swift\nlet x = 1\n```"]).shown == ["```swift\nlet x = 1\n```"])
        #expect(relay(["Functions are"]).shown == ["Functions are"])
    }
}
