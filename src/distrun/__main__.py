from distrun.cli import main

main()
