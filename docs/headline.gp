# The README's plot; test/report-headline draws it from docs/headline.dat:
# gnuplot -e "dat='docs/headline.dat'; out='docs/headline.svg'" docs/headline.gp
set terminal svg size 760,380 font 'sans,12' noenhanced
set output out
set title 'mlock+munlock pair: times fewer instructions than the syscall'
set ylabel 'speed-up over mlock(2)+munlock(2)'
set logscale y
set yrange [1:40]
set ytics (1, 2, 3, 5, 10, 20, 30)
set grid ytics
set style data histograms
set style histogram cluster gap 1
set style fill solid 0.85 border -1
set key top left
set xtics rotate by -30
plot dat using 2:xtic(1) title 'ioctl (/dev/mlockfast)', \
     '' using 3 title 'routed syscall (no library)'
