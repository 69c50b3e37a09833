from distrun.entry import main

main()
