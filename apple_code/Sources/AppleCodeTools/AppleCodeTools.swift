import AppleCodeCore

/// The tools offered for a run, in contract order. (Placeholder until the tools land.)
public func standardTools(readOnly: Bool, allowCommands: Bool) -> [any AgentTool] {
    []
}
