/// Turns the cumulative snapshots of a response stream into the `text` deltas of the contract.
///
/// FoundationModels streams snapshots (the whole text so far), not deltas. A snapshot normally extends the
/// previous one; when it does not (the model revised earlier text), the consumer is told to start over.
struct SnapshotDeltas: Sendable {
    enum Change: Sendable, Equatable {
        case none
        /// New text at the end of what was already sent.
        case append(String)
        /// The snapshot does not extend what was sent: this is the whole text again.
        case restart(String)
    }

    /// The latest snapshot: the answer so far.
    private(set) var text = ""

    mutating func next(_ snapshot: String) -> Change {
        defer { text = snapshot }
        if snapshot == text { return .none }
        if snapshot.hasPrefix(text) { return .append(String(snapshot.dropFirst(text.count))) }
        return .restart(snapshot)
    }
}
