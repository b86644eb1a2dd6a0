import AppleCodeCore
import Testing
@testable import AppleCodeAgent

/// The servers' context-length refusals, each in its own shape, and what is not one.
@Suite struct ContextOverflowTests {
    @Test func llamaCppPythonAndOpenAI() throws {
        let python = ContextOverflow.recognise(body: #"{"error":{"message":"This model's maximum context length is 4096 tokens. However, you requested 4608 tokens (4096 in the messages, 512 in the completion).","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#)
        #expect(python?.requestedTokens == 4608 && python?.windowTokens == 4096)
        let openAI = ContextOverflow.recognise(body: #"{"error":{"message":"This model's maximum context length is 8,192 tokens. However, your messages resulted in 9,001 tokens.","code":"context_length_exceeded"}}"#)
        #expect(openAI?.requestedTokens == 9001 && openAI?.windowTokens == 8192)
    }

    @Test func llamaCppAndOllama() {
        let llama = ContextOverflow.recognise(body: #"{"error":{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error","n_prompt_tokens":5000,"n_ctx":4096}}"#)
        #expect(llama?.requestedTokens == 5000 && llama?.windowTokens == 4096)
        #expect(ContextOverflow.recognise(body: #"{"error":"the input length exceeds the context length"}"#) != nil)
        #expect(ContextOverflow.recognise(body: #"{"error":{"message":"the input length exceeds the context length","type":"invalid_request_error"}}"#)?.message
            == "the input length exceeds the context length")
    }

    @Test func otherErrorsAreNotOverflows() {
        #expect(ContextOverflow.recognise(body: #"{"error":{"message":"model 'x' not found","code":"model_not_found"}}"#) == nil)
        #expect(ContextOverflow.recognise(body: "Internal Server Error") == nil)
        #expect(ContextOverflow.recognise(body: #"{"choices":[]}"#) == nil)
    }

    @Test func aStreamedErrorEventIsOneToo() {
        var assembler = ChatStreamAssembler()
        #expect(throws: ContextOverflow.self) {
            _ = try assembler.add(#"{"error":{"message":"the input length exceeds the context length"}}"#, url: "u")
        }
        #expect(throws: AgentError.self) { _ = try assembler.add(#"{"error":{"message":"boom"}}"#, url: "u") }
    }
}
