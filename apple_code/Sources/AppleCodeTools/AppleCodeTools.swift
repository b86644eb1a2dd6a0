import AppleCodeCore

/// The tools offered for a run, in contract order: readFile, writeFile, editFile, listDirectory, searchFiles,
/// searchContent, runCommand. `--read-only` keeps the four that only read; `--no-commands` drops runCommand.
public func standardTools(readOnly: Bool, allowCommands: Bool) -> [any AgentTool] {
    var tools: [any AgentTool] = [ReadFileTool()]
    if !readOnly { tools += [WriteFileTool(), EditFileTool()] }
    tools += [ListDirectoryTool(), SearchFilesTool(), SearchContentTool()] as [any AgentTool]
    if !readOnly, allowCommands { tools.append(RunCommandTool()) }
    return tools
}
