#if canImport(FoundationModels)
import FoundationModels
#else
import FoundationModelsMirror
#endif
import AppleCodeCore

/// The on-device model's own token counts, `SystemLanguageModel.tokenCount(for:)`: built with the 26.4 SDK
/// (`FM_SDK_26_4`) and run on macOS 26.4 or later. Elsewhere, or when the model cannot count (it throws), every
/// count is nil and the estimator budgets as before.
struct ModelTokens: TokenCounter {
    let model: SystemLanguageModel

    var source: String { "SystemLanguageModel.tokenCount" }

    func count(_ text: String) async -> Int? {
        #if FM_SDK_26_4
        if #available(macOS 26.4, *) { return try? await model.tokenCount(for: text) }
        #endif
        return nil
    }

    func count(instructions: String) async -> Int? {
        #if FM_SDK_26_4
        if #available(macOS 26.4, *) { return try? await model.tokenCount(for: Instructions(instructions)) }
        #endif
        return nil
    }

    /// The tool definitions as the framework puts them into the instructions (name, description, schema).
    func count(tools specs: [ToolSpec]) async -> Int? {
        #if FM_SDK_26_4
        if #available(macOS 26.4, *) {
            guard let tools = try? specs.map({ try ToolDefinition($0) }) else { return nil }
            return try? await model.tokenCount(for: tools)
        }
        #endif
        return nil
    }

    /// The budget of one window: the model's counts where it gives all of them, else the estimate.
    func plan(window: Int, instructions: String, tools: [ToolSpec]) async -> ContextPlan {
        guard let instructionTokens = await count(instructions: instructions),
              let toolTokens = tools.isEmpty ? 0 : await count(tools: tools) else {
            return ContextPlan(window: window, instructions: instructions, tools: tools)
        }
        return ContextPlan(budget: ContextBudget(contextTokens: window, instructionTokens: instructionTokens,
                                                 toolTokens: toolTokens, countedBy: source))
    }
}

/// A tool as its definition alone, for counting what the instructions carry before the real tools exist.
private struct ToolDefinition: Tool {
    let name: String
    let description: String
    let parameters: GenerationSchema

    init(_ spec: ToolSpec) throws {
        name = spec.name
        description = spec.description
        parameters = try FrameworkTool.schema(for: spec)
    }

    func call(arguments: GeneratedContent) async throws -> String { "" }
}
