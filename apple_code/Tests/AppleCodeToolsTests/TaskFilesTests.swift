import AppleCodeCore
import Foundation
import Testing
@testable import AppleCodeTools

/// The files a task names, shown with it: only what the file tools would read, whole, within the budget.
@Suite struct TaskFilesTests {
    @Test func theNamedTextFilesFollowInTheTasksOrder() throws {
        let ws = try TempWorkspace()
        try ws.write("calc.py", "def add(a, b):\n    return a - b\n")
        try ws.write("src/app.js", "export const x = 1;\n")
        try ws.write("other.py", "print('not named')\n")
        let shown = TaskFiles.shown(task: "Fix calc.py, then see src/app.js and missing.py.",
                                    in: try Workspace(ws.path), tokens: 1000)
        #expect(shown?.text == "calc.py:\n```\ndef add(a, b):\n    return a - b\n```\n\nsrc/app.js:\n```\nexport const x = 1;\n```")
        #expect(shown?.paths == ["calc.py", "src/app.js"])
    }

    @Test func nothingTheToolsWouldRefuseIsShown() throws {
        let ws = try TempWorkspace()
        try ws.write(".env", "TOKEN=1\n")
        try ws.write("data.bin", "a\u{0}b")
        try FileManager.default.createSymbolicLink(atPath: ws.path + "/link.txt", withDestinationPath: ws.outside + "/secret.txt")
        try FileManager.default.createDirectory(atPath: ws.path + "/dir.d", withIntermediateDirectories: true)
        let workspace = try Workspace(ws.path, hidden: HiddenPaths(paths: [ws.path + "/.env"]))
        let task = "Look at .env, data.bin, link.txt, dir.d, ../outside/secret.txt and \(ws.outside)/secret.txt"
        #expect(TaskFiles.shown(task: task, in: workspace, tokens: 1000) == nil)
    }

    @Test func aFileThatDoesNotFitIsLeftForTheModelToReadAndAtMostThreeAreShown() throws {
        let ws = try TempWorkspace()
        try ws.write("big.py", String(repeating: "x = 1\n", count: 400))
        for name in ["a.py", "b.py", "c.py", "d.py"] { try ws.write(name, "# \(name)\n") }
        let shown = TaskFiles.shown(task: "big.py a.py b.py c.py d.py", in: try Workspace(ws.path), tokens: 200)?.text
        #expect(shown?.contains("big.py") == false)
        #expect(shown?.components(separatedBy: ":\n```\n").count == 4)  // three files shown
        #expect(shown?.contains("# d.py") == true && shown?.contains("a.py") == false)  // the last named
        #expect(TaskFiles.shown(task: "a.py", in: try Workspace(ws.path), tokens: 3) == nil)
    }

    /// A prompt with earlier conversation before the new message: the files the message names win.
    @Test func theFilesNamedLastAreChosenWhenThereAreMore() throws {
        let ws = try TempWorkspace()
        for name in ["a.py", "b.py", "c.py", "d.py"] { try ws.write(name, "# \(name)\n") }
        let task = "Earlier: User: look at a.py and b.py\nAssistant: ok\nNew message:\nwhat do c.py, d.py and b.py do?"
        #expect(TaskFiles.shown(task: task, in: try Workspace(ws.path), tokens: 1000)?.paths == ["b.py", "c.py", "d.py"])
    }
}
