console.log('plugin');
