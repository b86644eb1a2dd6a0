/// The `--timeout` deadline: races the work against a timer and cancels the loser.
struct DeadlineExpired: Error, Sendable {}

func withDeadline<T: Sendable>(_ deadline: ContinuousClock.Instant?,
                               _ work: @escaping @Sendable () async throws -> T) async throws -> T {
    guard let deadline else { return try await work() }
    return try await withThrowingTaskGroup(of: T.self) { group in
        group.addTask { try await work() }
        group.addTask {
            try await Task.sleep(until: deadline, clock: .continuous)
            throw DeadlineExpired()
        }
        defer { group.cancelAll() }
        guard let first = try await group.next() else { throw CancellationError() }
        return first
    }
}

/// Backoff for `rateLimited` and `concurrentRequests`: doubling delays, never past the deadline.
struct RetryPolicy: Sendable, Equatable {
    var firstDelay: Duration
    var maxDelay: Duration
    var maxRetries: Int

    static let standard = RetryPolicy(firstDelay: .seconds(1), maxDelay: .seconds(8), maxRetries: 6)

    /// The wait before retry number `retry` (1-based), or nil when no retry is left before the deadline.
    func delay(retry: Int, deadline: ContinuousClock.Instant?, now: ContinuousClock.Instant = .now) -> Duration? {
        guard retry <= maxRetries else { return nil }
        var delay = firstDelay
        for _ in 1..<max(1, retry) { delay = min(maxDelay, delay * 2) }
        if let deadline, now + delay >= deadline { return nil }
        return delay
    }
}
