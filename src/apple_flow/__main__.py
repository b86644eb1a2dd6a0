from apple_flow.cli import main

main()
