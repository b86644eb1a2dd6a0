/// The version printed by `apple-code --version` and carried in the `start` event.
public enum AppleCodeVersion {
    public static let current = "1.0.0"
    /// Version of the command-line contract (`apple_code/CONTRACT.md`) this build implements.
    public static let contract = 1
}
