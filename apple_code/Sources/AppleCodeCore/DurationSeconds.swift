extension Duration {
    /// Whole and fractional seconds (for URLRequest timeouts and reported figures).
    public var seconds: Double {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }
}
