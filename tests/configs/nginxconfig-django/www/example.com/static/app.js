console.log('django');
