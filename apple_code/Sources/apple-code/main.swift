// apple-code: parse the command line, pick the backend, run, render, exit (contract: apple_code/CONTRACT.md).
import AppleCodeCore
import AppleCodeTools
import Foundation

// A closed stdout must not kill the run before it reports; SIGINT/SIGTERM are handled as events (RunControl).
signal(SIGPIPE, SIG_IGN)

let arguments = Array(CommandLine.arguments.dropFirst())
let environment = ProcessInfo.processInfo.environment
let started = ContinuousClock.now
let stdinSource = PromptSource(stdinIsTerminal: isatty(0) != 0) {
    String(validating: FileHandle.standardInput.readDataToEndOfFile(), as: UTF8.self)
}

switch OptionParser.parse(arguments, environment: environment, prompt: stdinSource) {
case .failure(let error):
    let output = Output(format: OptionParser.requestedFormat(arguments), verbose: false)
    let report = RunReport(outcome: .usage, result: error.message, durationMs: 0, progress: RunProgress(),
                           backend: "", model: "")
    output.finish(report, partial: "")
    output.stderr("Try 'apple-code --help'.")
    exit(RunOutcome.usage.exitCode)
case .success(.help):
    print(OptionParser.usage)
    exit(0)
case .success(.version):
    print("apple-code \(AppleCodeVersion.current)")
    exit(0)
case .success(.check(let options)):
    let (backend, availability) = await BackendResolver.check(options)
    var report = availability.checkJSON(backend: backend).objectValue ?? JSONObject()
    report["sandbox"] = .string(CommandSandbox.detected.label)  // what runCommand would run commands in
    Output(format: .json, verbose: false).stdout(JSONValue.object(report).jsonText)
    exit(availability.available ? 0 : RunOutcome.modelUnavailable.exitCode)
case .success(.sandboxCheck(let options)):
    limitCommands(options)
    let checks = await SandboxSelfTest.run(deniedPorts: options.deniedPorts)
    print(SandboxSelfTest.report(checks, sandbox: CommandSandbox.detected))
    exit(checks.allSatisfy(\.passed) ? 0 : 1)
case .success(.run(let options)):
    limitCommands(options, modelURL: options.baseURL)
    let code = await Runner(options: options, environment: environment, started: started).run()
    exit(code)
}

/// What commands and file tools may not reach in this process: the hidden paths (relative ones against the current
/// folder), the loopback ports the caller named, and the model server's when it is on this machine (`modelURL`).
func limitCommands(_ options: RunOptions, modelURL: String? = nil) {
    HiddenPaths.configure(extra: options.hide, current: FileManager.default.currentDirectoryPath)
    SeatbeltProfile.configure(deniedPorts: SeatbeltProfile.deniedPorts(named: options.deniedPorts, modelURL: modelURL,
                                                                       environment: environment))
}
