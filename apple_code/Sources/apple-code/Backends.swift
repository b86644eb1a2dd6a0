import AppleCodeAgent
import AppleCodeCore
import AppleCodeFM
import Foundation

/// Picks the backend (contract: `--backend`): `fm` when asked or (for `auto`) available; else the OpenAI one,
/// for `auto` only when it is configured; otherwise exit 3 with the reasons.
enum BackendResolver {
    static let notConfigured = "No OpenAI-compatible server is configured: give --base-url and --model (or set "
        + "APPLE_CODE_BASE_URL / APPLE_CODE_MODEL), for example after scripts/local-model.sh start "
        + "(--base-url http://127.0.0.1:8765/v1) or `ollama serve`"

    static func resolve(_ options: RunOptions, environment: [String: String],
                        log: @escaping @Sendable (String) -> Void) async throws -> any AgentBackend {
        switch options.backend {
        case .fm:
            let fm = FoundationModelsBackend(contextTokens: options.contextTokens)
            let availability = await fm.availability()
            guard availability.available else {
                throw AgentError(.modelUnavailable, "Apple Foundation Models is not available: \(availability.reason)")
            }
            return fm
        case .openai:
            return try await openAI(options, environment: environment, log: log)
        case .auto:
            let fm = FoundationModelsBackend(contextTokens: options.contextTokens)
            let availability = await fm.availability()
            if availability.available { return fm }
            log("Foundation Models not available (\(availability.reason))")
            guard options.openAIConfigured else {
                throw AgentError(.modelUnavailable,
                                 "Apple Foundation Models is not available: \(availability.reason). \(notConfigured).")
            }
            return try await openAI(options, environment: environment, log: log)
        }
    }

    /// The OpenAI backend after `GET /models`: fails fast (exit 3) when the server cannot be reached at all,
    /// waits for a busy one (it accepts the connection, answers later), learns the model name when none was
    /// given, and whether the server drops tool messages. `--timeout` ends the wait (exit 124, RunControl).
    static func openAI(_ options: RunOptions, environment: [String: String],
                       log: @escaping @Sendable (String) -> Void) async throws -> OpenAIBackend {
        let endpoint = OpenAIEndpoint(baseURL: options.baseURL, apiKey: options.apiKey)
        var style = try toolResultStyle(environment)
        var model = options.model
        var llamaCppPython = false
        var takesAllowedTools = false
        switch await OpenAIBackend.probe(endpoint, waitWhileBusy: true, log: log) {
        case .success(let probe):
            log("server at \(endpoint.baseURL): models \(probe.models)"
                + (probe.dropsToolMessages ? ", llama-cpp-python (tool results folded into user messages)" : ""))
            if model == nil { model = probe.models.first }
            if style == nil, probe.dropsToolMessages { style = .userMessages }
            llamaCppPython = probe.dropsToolMessages
            takesAllowedTools = probe.takesAllowedTools
            // apple-flow's server renders tool messages with the model's own template: a model that repeats a call
            // is repeating itself, not missing the result, so no switch to folded results.
            if style == nil, probe.takesAllowedTools { style = .toolMessages }
        case .failure(let error) where error.outcome == .modelUnavailable:
            throw error
        case .failure(let error):
            log("\(error.message); going on")
        }
        return OpenAIBackend(endpoint: endpoint, model: model ?? "default", contextTokens: options.contextTokens,
                             style: style, escapesHTML: llamaCppPython, looksFirst: takesAllowedTools)
    }

    /// `APPLE_CODE_TOOL_RESULTS=tool|user` fixes how tool results are sent; unset or `auto` detects it.
    static func toolResultStyle(_ environment: [String: String]) throws -> ToolResultStyle? {
        guard let value = environment["APPLE_CODE_TOOL_RESULTS"], !value.isEmpty, value != "auto" else { return nil }
        guard let style = ToolResultStyle(rawValue: value) else {
            throw AgentError(.usage, "APPLE_CODE_TOOL_RESULTS must be tool, user or auto, got '\(value)'")
        }
        return style
    }

    /// `--check`: the availability JSON of the backend `options` would use.
    static func check(_ options: RunOptions) async -> (backend: String, availability: Availability) {
        let openAI = OpenAIBackend(endpoint: OpenAIEndpoint(baseURL: options.baseURL, apiKey: options.apiKey),
                                   model: options.model ?? "default", contextTokens: options.contextTokens)
        switch options.backend {
        case .fm:
            return ("fm", await FoundationModelsBackend(contextTokens: options.contextTokens).availability())
        case .openai:
            return ("openai", await openAI.availability())
        case .auto:
            let fm = await FoundationModelsBackend(contextTokens: options.contextTokens).availability()
            if fm.available { return ("fm", fm) }
            guard options.openAIConfigured else {
                return ("auto", Availability(available: false,
                                             reason: "Apple Foundation Models: \(fm.reason). \(notConfigured)."))
            }
            return ("openai", await openAI.availability())
        }
    }
}
