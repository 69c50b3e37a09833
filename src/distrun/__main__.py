from distrun.cli.entry import main

main()
