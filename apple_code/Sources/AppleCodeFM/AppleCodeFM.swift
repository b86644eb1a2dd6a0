import AppleCodeCore

/// Apple's on-device model through FoundationModels. (Placeholder until the backend lands.)
public struct FoundationModelsBackend: AgentBackend {
    public let name = "fm"
    public let model = "apple-on-device"
    public let contextTokens: Int

    public init(contextTokens: Int? = nil) {
        self.contextTokens = contextTokens ?? 4096
    }

    public func availability() async -> Availability {
        Availability(available: false, reason: "the Foundation Models backend is not built yet")
    }

    public func run(_ request: AgentRequest, events: any EventSink) async throws -> AgentAnswer {
        throw AgentError(.modelUnavailable, "the Foundation Models backend is not built yet")
    }
}
