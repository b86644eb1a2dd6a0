import Testing
@testable import AppleCodePlan
