use super::*;

/// The text of every `<text>` element, in order.
fn texts(svg: &str) -> Vec<String> {
    svg.split("<text")
        .skip(1)
        .filter_map(|t| {
            t.split_once('>')
                .and_then(|(_, rest)| rest.split_once("</text>"))
        })
        .map(|(text, _)| text.trim().to_owned())
        .collect()
}

fn plot(kind: PlotKind, tsv: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("table.tsv");
    std::fs::write(&table, tsv).unwrap();
    let args = PlotArgs {
        kind,
        table: table.clone(),
        output: None,
        title: None,
    };
    let mut said = Vec::new();
    run(&args, &mut said).unwrap();
    let svg = std::fs::read_to_string(dir.path().join("table.svg")).unwrap();
    assert!(
        svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"),
        "{svg}"
    );
    assert_eq!(
        String::from_utf8(said).unwrap(),
        format!("plot: {}\n", dir.path().join("table.svg").display())
    );
    svg
}

#[test]
fn the_proxy_plot_names_every_proxy_and_draws_a_bar_each() {
    let svg = plot(
        PlotKind::Proxy,
        "proxy\tconns\tfile\thits/s\tBW in\tBW out\tBW saved\tratio\tRSS\n\
         haproxy\t500\tindex.html\t4462\t341.0MiB/s\t172.2MiB/s\t49.5%\t1.98\t31.0MiB\n\
         zipwire\t500\tindex.html\t4300\t330.0MiB/s\t122.2MiB/s\t63.0%\t2.70\t60.0MiB\n",
    );
    let texts = texts(&svg);
    for want in ["haproxy", "zipwire", "4462", "4300", "1.98", "2.70"] {
        assert!(texts.iter().any(|t| t == want), "no {want:?} in {texts:?}");
    }
    assert!(texts.iter().any(|t| t.contains("hits/s")), "{texts:?}");
    // Two bars a panel, in the first series colour.
    assert_eq!(svg.matches("fill=\"#2563EB\"").count(), 4, "{svg}");
}

#[test]
fn the_speed_ratio_plot_has_a_series_per_engine() {
    let svg = plot(
        PlotKind::Codec,
        "engine\tlevel\tMB/s\tratio\nzipwire\t1\t480.5\t4.67\nzipwire\t2\t420.0\t4.83\n\
         libdeflate\t1\t311.1\t5.03\nzlib-rs\t6\t60.2\t5.30\n",
    );
    let texts = texts(&svg);
    for want in [
        "zipwire",
        "libdeflate",
        "zlib-rs",
        "level 1",
        "level 6",
        "MB/s (uncompressed)",
    ] {
        assert!(texts.iter().any(|t| t == want), "no {want:?} in {texts:?}");
    }
    let cli = plot(
        PlotKind::Cli,
        "command\twall s\tMB/s\tratio\tpeak RSS MB\nzipwire -1 -p1\t0.2\t500\t3.0\t5\n\
         pigz -1 -p1\t1.0\t100\t3.1\t4\n",
    );
    let texts = self::texts(&cli);
    for want in ["zipwire", "pigz", "-1 -p1"] {
        assert!(texts.iter().any(|t| t == want), "no {want:?} in {texts:?}");
    }
}

#[test]
fn the_tunnel_plot_has_a_bar_series_per_method() {
    let svg = plot(
        PlotKind::Tunnel,
        "link\tdata\tssh -C\tzw raw\tzw auto\tauto/fixed\n10 Mbit\ttext\t2.1\t1.2\t3.6\t1.1\n\
         unlimited\tmixed\t80.5\t300.2\t250.0\t0.83\n",
    );
    let texts = texts(&svg);
    for want in [
        "ssh -C",
        "zw raw",
        "zw auto",
        "10 Mbit text",
        "unlimited mixed",
        "300",
    ] {
        assert!(texts.iter().any(|t| t == want), "no {want:?} in {texts:?}");
    }
    assert!(!texts.iter().any(|t| t == "auto/fixed"), "{texts:?}");
}

#[test]
fn a_table_without_the_columns_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("t.tsv");
    std::fs::write(&table, "name\tvalue\nx\t1\n").unwrap();
    let args = PlotArgs {
        kind: PlotKind::Proxy,
        table,
        output: None,
        title: None,
    };
    let error = run(&args, &mut Vec::new()).unwrap_err();
    assert!(
        format!("{error:#}").contains("no column proxy"),
        "{error:#}"
    );
}
