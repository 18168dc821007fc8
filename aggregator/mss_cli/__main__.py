from mss_cli.main import main

main(prog_name="mss")
