import Testing
@testable import AppleCodeFM
