from fpsim.cli import main

raise SystemExit(main())
