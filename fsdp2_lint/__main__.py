from fsdp2_lint.cli import main

main()
