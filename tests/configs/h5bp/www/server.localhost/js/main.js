console.log("main");
