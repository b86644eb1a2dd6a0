import Testing
@testable import AppleCodePlan

@Suite struct PlanParserTests {
    @Test func plainJSONArray() {
        #expect(PlanParser.subtasks(from: #"  ["Read a.py", "Fix b.py",  "Test c.py"] "#)
            == ["Read a.py", "Fix b.py", "Test c.py"])
    }

    @Test func fencedJSONWithLanguageTag() {
        let reply = """
            Here is my plan:
            ```json
            ["Read a.py and fix greet()",
             "Update b.py"]
            ```
            Good luck!
            """
        #expect(PlanParser.subtasks(from: reply) == ["Read a.py and fix greet()", "Update b.py"])
    }

    @Test func arrayInsideProse() {
        #expect(PlanParser.subtasks(from: #"The subtasks are ["one", "two"] in that order."#) == ["one", "two"])
    }

    @Test func objectsInsteadOfStrings() {
        let reply = #"[{"id": 1, "subtask": "Read a.py"}, {"title": "Fix b.py"}, {"x": 3, "note": "Check c"}]"#
        #expect(PlanParser.subtasks(from: reply) == ["Read a.py", "Fix b.py", "Check c"])
    }

    @Test func numberedLinesWithEmphasisAndContinuations() {
        let reply = """
            Plan:
            1. **Read a.py** and find the bug
            2) Fix the bug in b.py,
               keeping the old name as an alias
            Step 3: Run the tests
            - this bullet is ignored because numbered lines exist
            That is all.
            """
        #expect(PlanParser.subtasks(from: reply) == [
            "Read a.py and find the bug",
            "Fix the bug in b.py, keeping the old name as an alias",
            "Run the tests",
        ])
    }

    @Test func bulletedLines() {
        let reply = "I will:\n- Read a.py\n* Fix b.py\n• Write \"c.py\"\n"
        #expect(PlanParser.subtasks(from: reply) == ["Read a.py", "Fix b.py", "Write \"c.py\""])
    }

    @Test func multilineStringsBecomeOneLine() {
        #expect(PlanParser.subtasks(from: #"["Read\n  a.py", "  "]"#) == ["Read a.py"])
    }

    @Test(arguments: ["", "   ", "I cannot help with that.", "[]", #"["", "  "]"#, "[1, 2, 3]", "{\"plan\": 1}",
                      "```\nnot json\n```", "Version 2.0 is out", "3.14 is pi"])
    func garbageGivesNoSubtasks(reply: String) {
        #expect(PlanParser.subtasks(from: reply).isEmpty)
    }
}
