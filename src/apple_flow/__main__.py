from apple_flow.cli import app

app()
