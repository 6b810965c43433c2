<?php
// Slower than the location's fastcgi_read_timeout.
sleep((int)($_GET['s'] ?? 3));
echo "late\n";
