import AppleCodeCore
import Testing
@testable import AppleCodeAgent

/// The history ladder one rung at a time, without a model: each step takes the least useful part first, and the
/// task and user messages after it are never touched.
@Suite struct HistoryLadderTests {
    static let long = String(repeating: "line of a file that the model read\n", count: 60)

    static func exchange(_ id: String, _ name: String, _ arguments: String, result: String) -> [ChatEntry] {
        [.assistant(text: "", calls: [ModelToolCall(id: id, name: name, argumentsText: arguments)]),
         .toolResult(id: id, name: name, text: result, summary: "\(name) \(id)", condensed: false)]
    }

    static let history: [ChatEntry] = [.user("Fix a.py")]
        + exchange("c1", "readFile", #"{"path":"a.py"}"#, result: long)
        + exchange("c2", "writeFile", #"{"path":"b.py","content":"\#(String(repeating: "x", count: 400))"}"#,
                   result: "wrote 400 bytes")
        + [.user("The check `make` failed (exit code 1).")]
        + exchange("c3", "readFile", #"{"path":"b.py"}"#, result: long)

    @Test func eachRungInOrder() throws {
        var entries = Self.history
        var rungs: [HistoryLadder.Rung] = []
        while let (lower, rung) = HistoryLadder.step(entries, over: 40), rungs.count < 30 {
            // The task and the user's messages survive every rung.
            #expect(lower.first == .user("Fix a.py"))
            #expect(lower.contains(.user("The check `make` failed (exit code 1).")))
            entries = lower
            rungs.append(rung)
        }
        let cuts = rungs.filter { if case .cutNewestResult = $0 { true } else { false } }
        let rest = rungs.filter { if case .cutNewestResult = $0 { false } else { true } }
        #expect(rest == [
            .condensedOlderResult(at: 2), .condensedOlderResult(at: 4),  // older results to their summaries
            .cutArgumentsThatRan(at: 3),  // writeFile's content, which is on disk
            .droppedOlderExchange(1..<3), .droppedOlderExchange(1..<3),  // the oldest whole exchanges
            .condensedNewestResult(at: 3),  // the newest result, once cutting does not shorten it
            .droppedNewestExchange(2..<4),  // and at last the newest exchange
        ])
        #expect(!cuts.isEmpty)  // before it was condensed, the newest result was cut by what is over
        #expect(entries == [.user("Fix a.py"), .user("The check `make` failed (exit code 1).")])
    }

    @Test func theNewestResultIsCutByWhatIsOver() throws {
        let entries: [ChatEntry] = [.user("Fix a.py")] + Self.exchange("c1", "readFile", "{}", result: Self.long)
        let (lower, rung) = try #require(HistoryLadder.step(entries, over: 100))
        #expect(rung == .cutNewestResult(at: 2))
        guard case .toolResult(_, _, let text, _, false) = lower[2] else {
            Issue.record("\(lower[2])")
            return
        }
        let before = TokenEstimator.estimate(JSONValue.string(Self.long).jsonText)
        let after = TokenEstimator.estimate(JSONValue.string(text).jsonText)
        #expect(after <= before - 100 && after >= before - 140)
    }

    @Test func aCallWithoutItsResultsKeepsItsArguments() {
        // The newest call has not run yet (no result): its long arguments stay until the last rungs.
        let call = ModelToolCall(id: "c1", name: "writeFile", argumentsText: #"{"content":"\#(Self.long)"}"#)
        let entries: [ChatEntry] = [.user("task"), .assistant(text: "", calls: [call])]
        #expect(HistoryLadder.step(entries, over: 10)?.rung == .cutNewestCall(at: 1))
    }

    @Test func leanHistoryCondensesOlderResultsAndCutsArguments() {
        let lean = HistoryLadder.lean(Self.history)
        #expect(lean[2] == Self.history[2].condensed)
        #expect(lean[3] == Self.history[3].withLongArgumentsCut)
        #expect(lean[7] == Self.history[7])  // the newest result is what the room is for
    }

    @Test func overflowRecoveryShrinksRetriesThenAsksThenGivesUp() {
        var recovery = OverflowRecovery(limit: 4096, floor: 1024)
        #expect(recovery.refused(figure: 3600, asking: false) == .retry)
        #expect(recovery.limit == 2700)
        #expect(recovery.refused(figure: 2600, asking: false) == .askForAnswer)
        #expect(recovery.limit == 1950)
        #expect(recovery.refused(figure: 1900, asking: true) == .retry)
        #expect(recovery.refused(figure: 1400, asking: true) == .retry)
        #expect(recovery.limit == 1050)
        #expect(recovery.refused(figure: 1000, asking: true) == .giveUp)
        var low = OverflowRecovery(limit: 1100, floor: 1024)
        _ = low.refused(figure: 1100, asking: false)
        #expect(low.limit == 1024)
    }
}
